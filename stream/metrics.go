package stream

import "github.com/prometheus/client_golang/prometheus"

// Metrics export the activity of pools to Prometheus: the dibs_stream_*
// series, labelled by stream key (NewMetrics) or by a name the caller makes
// of it (NewMetricsBy). Plug Hooks into Config.Hooks; Forget drops the
// series of a stream that is gone.
type Metrics struct {
	reads, messages, acks, failures, dead *prometheus.CounterVec
	consumers, lag, pending               *prometheus.GaugeVec
	label                                 string
	name                                  func(stream string) string
}

// NewMetrics creates the stream series, labelled stream="<stream key>",
// and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return NewMetricsBy(reg, "stream", func(s string) string { return s })
}

// NewMetricsBy creates the stream series and registers them with reg. Each
// series carries one label, named label, whose value is name of the stream
// key: a service that runs one stream per promotion labels them
// promotion="<id>" rather than with raw Redis keys. name must map every
// stream to a value of a bounded set.
func NewMetricsBy(reg prometheus.Registerer, label string, name func(stream string) string) *Metrics {
	l := []string{label}
	m := &Metrics{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_stream_reads_total", Help: "XREADGROUP calls, by whether they returned entries.",
		}, []string{label, "result"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_stream_messages_total", Help: "Entries read from work streams.",
		}, l),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_stream_acks_total", Help: "Entries acknowledged after handling.",
		}, l),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_stream_failures_total", Help: "Handler and runtime failures, by kind.",
		}, []string{label, "kind"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_stream_dead_letters_total", Help: "Entries written to a dead-letter stream.",
		}, l),
		consumers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_stream_consumers", Help: "Consumers running in this process.",
		}, l),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_stream_lag", Help: "Entries not yet delivered to the group; absent while Redis cannot tell.",
		}, l),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_stream_pending", Help: "Entries delivered but not acknowledged.",
		}, l),
		label: label,
		name:  name,
	}
	reg.MustRegister(m.reads, m.messages, m.acks, m.failures, m.dead, m.consumers, m.lag, m.pending)
	return m
}

// Hooks returns the runtime hooks that feed m, for Config.Hooks. A lag
// Redis cannot tell (-1) removes the stream's lag series rather than
// exporting a number that is not one.
func (m *Metrics) Hooks() Hooks {
	return Hooks{
		Read: func(s string, n int) {
			if n == 0 {
				m.reads.WithLabelValues(m.name(s), "empty").Inc()
				return
			}
			m.reads.WithLabelValues(m.name(s), "entries").Inc()
			m.messages.WithLabelValues(m.name(s)).Add(float64(n))
		},
		Ack:        func(s string, n int) { m.acks.WithLabelValues(m.name(s)).Add(float64(n)) },
		Failure:    func(s, kind string) { m.failures.WithLabelValues(m.name(s), kind).Inc() },
		DeadLetter: func(s, _ string) { m.dead.WithLabelValues(m.name(s)).Inc() },
		Consumers:  func(s string, n int) { m.consumers.WithLabelValues(m.name(s)).Set(float64(n)) },
		Lag: func(s string, l, p int64) {
			v := m.name(s)
			if l < 0 {
				m.lag.DeleteLabelValues(v)
			} else {
				m.lag.WithLabelValues(v).Set(float64(l))
			}
			m.pending.WithLabelValues(v).Set(float64(p))
		},
	}
}

// Forget deletes every series of stream key s.
func (m *Metrics) Forget(s string) {
	match := prometheus.Labels{m.label: m.name(s)}
	for _, v := range []*prometheus.MetricVec{
		m.reads.MetricVec, m.messages.MetricVec, m.acks.MetricVec, m.failures.MetricVec, m.dead.MetricVec,
		m.consumers.MetricVec, m.lag.MetricVec, m.pending.MetricVec,
	} {
		v.DeletePartialMatch(match)
	}
}
