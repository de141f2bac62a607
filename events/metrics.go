package events

import "github.com/prometheus/client_golang/prometheus"

// Metrics export the deliveries to Prometheus, labelled by subscriber name
// (bounded: the configured subscribers).
type Metrics struct {
	delivered *prometheus.CounterVec
	failed    *prometheus.CounterVec
	lag       *prometheus.GaugeVec
	leader    *prometheus.GaugeVec
	pruned    prometheus.Counter
}

// NewMetrics creates the delivery series and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_events_delivered_total", Help: "Events a webhook subscriber answered with a 2xx, by subscriber.",
		}, []string{"subscriber"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_events_delivery_failures_total", Help: "Event deliveries that failed (no answer, or not a 2xx) and will be retried, by subscriber.",
		}, []string{"subscriber"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_events_lag", Help: "Events written that the subscriber has not been delivered yet (head seq minus its cursor), as seen by the instance delivering for it.",
		}, []string{"subscriber"}),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_events_delivering", Help: "1 while this instance holds the subscriber's lease and delivers for it.",
		}, []string{"subscriber"}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dibs_events_pruned_total", Help: "Events deleted from the outbox past the retention.",
		}),
	}
	reg.MustRegister(m.delivered, m.failed, m.lag, m.leader, m.pruned)
	return m
}
