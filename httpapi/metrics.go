package httpapi

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Prometheus metrics of the API's requests. The
// confirmation path's are promotion.Metrics.
type Metrics struct {
	// Claims counts claim requests by outcome (accepted, replayed, or a problem code).
	Claims *prometheus.CounterVec
	// ClaimSeconds is the latency of claim requests.
	ClaimSeconds prometheus.Histogram
	// Shed counts requests refused with overloaded.
	Shed prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_claims_total", Help: "Claim requests by outcome.",
		}, []string{"outcome"}),
		ClaimSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dibs_claim_duration_seconds",
			Help:    "Latency of claim requests, from arrival to answer.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		Shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dibs_shed_requests_total", Help: "Requests refused with overloaded.",
		}),
	}
	reg.MustRegister(m.Claims, m.ClaimSeconds, m.Shed)
	return m
}
