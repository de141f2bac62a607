package promotion

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/stream"
)

// Metrics export the confirmation path to Prometheus: claims issued and
// dead-lettered, each promotion's backlog and halt, and (through StreamHooks) the
// activity of the promotions' pools. Each method named after a Config hook
// is that hook: plug m.Issued into Config.OnIssued, m.DeadLetter into
// OnDeadLetter, m.Backlog into OnBacklog, m.Halted into OnHalted, m.Drained
// into OnDrained, and
// m.StreamHooks() into the Stream config's Hooks.
type Metrics struct {
	issued      prometheus.Counter
	deadLetters prometheus.Counter
	pending     *prometheus.GaugeVec
	halted      *prometheus.GaugeVec
	streams     *stream.Metrics
	prefix      string // the Redis key prefix, which names the streams
}

// NewMetrics creates the confirmation path's series, its pools' included,
// for promotions under the Redis key prefix (claim.DefaultPrefix if empty),
// and registers them with reg.
func NewMetrics(reg prometheus.Registerer, prefix string) *Metrics {
	if prefix == "" {
		prefix = claim.DefaultPrefix
	}
	m := &Metrics{
		issued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dibs_issued_total", Help: "Claims newly issued into the database.",
		}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dibs_dead_letters_total", Help: "Claims dead-lettered.",
		}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_pending_claims", Help: "Accepted claims not yet confirmed, by promotion.",
		}, []string{"promotion"}),
		halted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_promotion_halted", Help: "1 while a promotion is halted because its database lost claims Redis saw confirmed.",
		}, []string{"promotion"}),
		streams: stream.NewMetrics(reg),
		prefix:  prefix,
	}
	reg.MustRegister(m.issued, m.deadLetters, m.pending, m.halted)
	return m
}

// StreamHooks returns the pools' hooks that feed m, for the Hooks of
// Config.Stream.
func (m *Metrics) StreamHooks() stream.Hooks { return m.streams.Hooks() }

// Issued counts n rows newly issued; it is an OnIssued hook.
func (m *Metrics) Issued(_ string, n int) { m.issued.Add(float64(n)) }

// DeadLetter counts one dead-lettered claim; it is an OnDeadLetter hook.
func (m *Metrics) DeadLetter(string) { m.deadLetters.Inc() }

// Backlog sets the promotion's claims not yet confirmed; it is an
// OnBacklog hook.
func (m *Metrics) Backlog(promotionID string, backlog int64) {
	m.pending.WithLabelValues(promotionID).Set(float64(backlog))
}

// Halted sets whether the promotion is halted for an operator; it is an
// OnHalted hook.
func (m *Metrics) Halted(promotionID string, halted bool) {
	v := 0.0
	if halted {
		v = 1
	}
	m.halted.WithLabelValues(promotionID).Set(v)
}

// Drained deletes the series of a drained promotion, which costs nothing
// afterwards: its backlog and halt gauges and every series of its stream. It is an
// OnDrained hook.
func (m *Metrics) Drained(promotionID string) {
	m.pending.DeleteLabelValues(promotionID)
	m.halted.DeleteLabelValues(promotionID)
	m.streams.Forget(claim.KeysFor(m.prefix, promotionID).Stream())
}
