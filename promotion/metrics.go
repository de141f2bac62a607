package promotion

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/keyspace"
	"github.com/dibsio/dibs/stream"
)

// Metrics export the confirmation path to Prometheus: claims issued and
// dead-lettered, each promotion's backlog, the age of its oldest claim not
// yet issued, its remaining stock and its halt, the claims the journal put
// back or dropped, and (through StreamHooks) the activity of the
// promotions' pools, whose dibs_stream_* series are labelled by promotion.
// Each method named after a Config hook is that hook: plug m.Issued into
// Config.OnIssued, m.DeadLetter into OnDeadLetter, m.Backlog into
// OnBacklog, m.Halted into OnHalted, m.Requeued into OnRequeued,
// m.JournalDropped into OnJournalDropped, m.Journal into OnJournal,
// m.MemoryAnswer into
// OnMemoryAnswer, m.Remaining into OnRemaining, m.Handling into
// OnHandling, m.Drained into OnDrained, and m.StreamHooks() into the
// Stream config's Hooks. CountDeadLetters adds the dead letters waiting
// for an operator, read from the database.
type Metrics struct {
	issued      prometheus.Counter
	deadLetters prometheus.Counter
	pending     *prometheus.GaugeVec
	halted      *prometheus.GaugeVec
	requeued    *prometheus.CounterVec
	dropped     prometheus.Counter
	jClaims     prometheus.Gauge
	jBytes      prometheus.Gauge
	fromMemory  *prometheus.CounterVec
	remaining   *prometheus.GaugeVec
	// remainingOf holds remaining's child of each promotion with one, so a
	// claim's answer sets it without hashing its label (Remaining).
	remainingOf byPromotion[prometheus.Gauge]
	oldest      *oldestPending
	streams     *stream.Metrics
	reg         prometheus.Registerer
	prefix      string // the Redis key prefix, which names the streams
	// now is the clock of the series computed at scrape time; set before
	// any hook is called or any scrape.
	now func() time.Time
}

// NewMetrics creates the confirmation path's series, its pools' included,
// for promotions under the Redis key prefix (keyspace.DefaultPrefix if empty),
// and registers them with reg.
func NewMetrics(reg prometheus.Registerer, prefix string) *Metrics {
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
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
		requeued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_claims_requeued_total", Help: "Claims answered 202 by this instance that Redis lost and the instance put back, by promotion.",
		}, []string{"promotion"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dibs_journal_dropped_total", Help: "Claims answered 202 that the journal of unconfirmed claims could not keep (its memory budget spent, or its inbox full).",
		}),
		jClaims: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dibs_journal_claims", Help: "Claims answered 202 by this instance that its journal holds until it sees them confirmed.",
		}),
		jBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dibs_journal_bytes", Help: "Memory of the journal of unconfirmed claims, in bytes (its budget is promotions.journal_mib).",
		}),
		fromMemory: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_claims_answered_from_memory_total",
			Help: "Claims this instance answered from its sold-out memory without a Redis call, by promotion and code (sold_out or ended).",
		}, []string{"promotion", "code"}),
		remaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dibs_remaining",
			Help: "Stock left, by promotion, as this instance's last claim answer of it told (an accepted claim's remaining, 0 for sold out).",
		}, []string{"promotion"}),
		reg:    reg,
		prefix: prefix,
		now:    time.Now,
	}
	m.oldest = newOldestPending(func() time.Time { return m.now() })
	m.streams = stream.NewMetricsBy(reg, "promotion", m.promotionOf)
	reg.MustRegister(m.issued, m.deadLetters, m.pending, m.halted, m.requeued, m.dropped, m.jClaims, m.jBytes, m.fromMemory,
		m.remaining, m.oldest)
	return m
}

// promotionOf names the promotion whose work stream is key s, for the
// stream series' promotion label; a key of no promotion's stream is its own
// name.
func (m *Metrics) promotionOf(s string) string {
	id, ok := strings.CutPrefix(s, m.prefix+"{")
	if !ok {
		return s
	}
	if id, ok = strings.CutSuffix(id, "}:claims"); !ok || claim.KeysFor(m.prefix, id).Stream() != s {
		return s
	}
	return id
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

// Requeued counts n claims of the promotion that Redis lost and the
// journal put back; it is an OnRequeued hook.
func (m *Metrics) Requeued(promotionID string, n int) {
	m.requeued.WithLabelValues(promotionID).Add(float64(n))
}

// JournalDropped counts n claims the journal dropped; it is an
// OnJournalDropped hook.
func (m *Metrics) JournalDropped(_ string, n int) { m.dropped.Add(float64(n)) }

// Journal sets the claims the journal holds and the bytes it takes; it is
// an OnJournal hook.
func (m *Metrics) Journal(claims int, bytes int64) {
	m.jClaims.Set(float64(claims))
	m.jBytes.Set(float64(bytes))
}

// MemoryAnswer counts one claim of the promotion answered from the
// sold-out memory with code; it is an OnMemoryAnswer hook.
func (m *Metrics) MemoryAnswer(promotionID, code string) {
	m.fromMemory.WithLabelValues(promotionID, code).Inc()
}

// Remaining sets the promotion's stock left as a claim's answer told it;
// it is an OnRemaining hook.
func (m *Metrics) Remaining(promotionID string, remaining int64) {
	m.remainingOf.get(promotionID, m.remaining.WithLabelValues).Set(float64(remaining))
}

// Handling records what one consumer of the promotion's pool holds, for
// dibs_oldest_pending_seconds; it is an OnHandling hook.
func (m *Metrics) Handling(promotionID, consumer string, h Handling) {
	m.oldest.report(promotionID, consumer, h)
}

// Drained deletes the series of a drained promotion, which costs nothing
// afterwards: its backlog, oldest pending claim, remaining stock and halt
// gauges, its counts of claims put back and answered from memory, and
// every series of its stream (its unhandled dead letters stay until they
// are handled). It is an OnDrained hook.
func (m *Metrics) Drained(promotionID string) {
	m.pending.DeleteLabelValues(promotionID)
	m.remainingOf.drop(promotionID, func() { m.remaining.DeleteLabelValues(promotionID) })
	m.oldest.forget(promotionID)
	m.halted.DeleteLabelValues(promotionID)
	m.requeued.DeleteLabelValues(promotionID)
	m.fromMemory.DeletePartialMatch(prometheus.Labels{"promotion": promotionID})
	m.streams.Forget(claim.KeysFor(m.prefix, promotionID).Stream())
}

// CountDeadLetters registers dibs_dead_letters_unhandled{promotion}: the
// dead letters of each promotion that wait for an operator to replay or
// void them, read from c (the database) when /metrics is read, at most
// once per DeadLetterCountInterval. A promotion with none has no series.
// A read that fails keeps the last count: an outage of the database
// handles no dead letter.
func (m *Metrics) CountDeadLetters(c DeadLetterCounter) {
	m.reg.MustRegister(&unhandledDeadLetters{
		desc: prometheus.NewDesc("dibs_dead_letters_unhandled",
			"Dead letters waiting for an operator to replay or void them, by promotion (read from the database).",
			[]string{"promotion"}, nil),
		c:   c,
		now: func() time.Time { return m.now() },
	})
}

// byPromotion holds a metric vector's child of each promotion that has
// one, for the hooks called per claim. Readers take no lock: they read a
// map that is never written once stored; a writer, holding mu, stores a
// copy with a promotion added (its first use) or dropped (Drained). Its
// keys are the promotions with a series, which Drained bounds.
type byPromotion[V any] struct {
	mu sync.Mutex                   // held by writers only
	m  atomic.Pointer[map[string]V] // read by any goroutine; replaced under mu
}

// get returns the child of promotion id, made by mk the first time.
func (c *byPromotion[V]) get(id string, mk func(...string) V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[id]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.load()
	if v, ok := old[id]; ok {
		return v
	}
	next := make(map[string]V, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	v := mk(id)
	next[id] = v
	c.m.Store(&next)
	return v
}

// drop forgets promotion id's child and calls del, which deletes its
// series, under mu: a get that makes the child again after it makes a new
// series.
func (c *byPromotion[V]) drop(id string, del func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.load(); len(old) > 0 {
		if _, ok := old[id]; ok {
			next := make(map[string]V, len(old)-1)
			for k, v := range old {
				if k != id {
					next[k] = v
				}
			}
			c.m.Store(&next)
		}
	}
	del()
}

// load returns the stored map, nil if none; the caller must not change it.
func (c *byPromotion[V]) load() map[string]V {
	if m := c.m.Load(); m != nil {
		return *m
	}
	return nil
}
