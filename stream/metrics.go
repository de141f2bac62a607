package stream

import "github.com/prometheus/client_golang/prometheus"

// Metrics export the activity of pools to Prometheus: the dibs_stream_*
// series, labelled by stream key. Plug Hooks into Config.Hooks; Forget drops
// the series of a stream that is gone.
type Metrics struct {
	reads, messages, acks, failures, dead *prometheus.CounterVec
	consumers, lag, pending               *prometheus.GaugeVec
}

// NewMetrics creates the stream series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_stream_reads_total", Help: "XREADGROUP calls, by whether they returned entries.",
		}, []string{"stream", "result"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_stream_messages_total", Help: "Entries read from work streams.",
		}, []string{"stream"}),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_stream_acks_total", Help: "Entries acknowledged after handling.",
		}, []string{"stream"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_stream_failures_total", Help: "Handler and runtime failures, by kind.",
		}, []string{"stream", "kind"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_stream_dead_letters_total", Help: "Entries written to a dead-letter stream.",
		}, []string{"stream"}),
		consumers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_stream_consumers", Help: "Consumers running in this process, by stream.",
		}, []string{"stream"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_stream_lag", Help: "Entries not yet delivered to the group (-1: unknown).",
		}, []string{"stream"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_stream_pending", Help: "Entries delivered but not acknowledged.",
		}, []string{"stream"}),
	}
	reg.MustRegister(m.reads, m.messages, m.acks, m.failures, m.dead, m.consumers, m.lag, m.pending)
	return m
}

// Hooks returns the runtime hooks that feed m, for Config.Hooks.
func (m *Metrics) Hooks() Hooks {
	return Hooks{
		Read: func(s string, n int) {
			if n == 0 {
				m.reads.WithLabelValues(s, "empty").Inc()
				return
			}
			m.reads.WithLabelValues(s, "entries").Inc()
			m.messages.WithLabelValues(s).Add(float64(n))
		},
		Ack:        func(s string, n int) { m.acks.WithLabelValues(s).Add(float64(n)) },
		Failure:    func(s, kind string) { m.failures.WithLabelValues(s, kind).Inc() },
		DeadLetter: func(s, _ string) { m.dead.WithLabelValues(s).Inc() },
		Consumers:  func(s string, n int) { m.consumers.WithLabelValues(s).Set(float64(n)) },
		Lag: func(s string, l, p int64) {
			m.lag.WithLabelValues(s).Set(float64(l))
			m.pending.WithLabelValues(s).Set(float64(p))
		},
	}
}

// Forget deletes every series of stream key s.
func (m *Metrics) Forget(s string) {
	match := prometheus.Labels{"stream": s}
	for _, v := range []*prometheus.MetricVec{
		m.reads.MetricVec, m.messages.MetricVec, m.acks.MetricVec, m.failures.MetricVec, m.dead.MetricVec,
		m.consumers.MetricVec, m.lag.MetricVec, m.pending.MetricVec,
	} {
		v.DeletePartialMatch(match)
	}
}
