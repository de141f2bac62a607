package httpapi

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Prometheus metrics of the API and the confirmation path.
type Metrics struct {
	// Claims counts claim requests by outcome (accepted, replayed, or a problem code).
	Claims *prometheus.CounterVec
	// ClaimSeconds is the latency of claim requests.
	ClaimSeconds prometheus.Histogram
	// Issued counts claims newly written to the database.
	Issued prometheus.Counter
	// DeadLetters counts dead-lettered claims.
	DeadLetters prometheus.Counter
	// Pending is each promotion's confirmation backlog (pending + undelivered entries).
	Pending *prometheus.GaugeVec
	// Halted is 1 for a promotion halted for an operator because its
	// database lost claims Redis saw confirmed, else 0.
	Halted *prometheus.GaugeVec
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
		Issued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dibs_issued_total", Help: "Claims newly issued into the database.",
		}),
		DeadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dibs_dead_letters_total", Help: "Claims dead-lettered.",
		}),
		Pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_pending_claims", Help: "Accepted claims not yet confirmed, by promotion.",
		}, []string{"promotion"}),
		Halted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_promotion_halted", Help: "1 while a promotion is halted because its database lost claims Redis saw confirmed.",
		}, []string{"promotion"}),
		Shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dibs_shed_requests_total", Help: "Requests refused with overloaded.",
		}),
	}
	reg.MustRegister(m.Claims, m.ClaimSeconds, m.Issued, m.DeadLetters, m.Pending, m.Halted, m.Shed)
	return m
}
