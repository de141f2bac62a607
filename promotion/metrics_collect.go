package promotion

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The series computed when /metrics is read: the age of each promotion's
// oldest claim not yet issued (from what the consumers reported, so it
// grows while they are stuck) and the dead letters waiting for an
// operator (from the database).

// oldestPending is dibs_oldest_pending_seconds: the reports of the
// consumers of each promotion on this instance (see Handling), kept until
// they lapse. The consumers write it and scrapes read it, under mu.
type oldestPending struct {
	desc *prometheus.Desc
	now  func() time.Time

	mu sync.Mutex
	// by holds, per promotion whose pool reported, each consumer's
	// standing report; a promotion with none left reads 0.
	by map[string]map[string]standing
}

// standing is a report of a consumer and until when it stands (zero:
// until the next one).
type standing struct {
	oldest, until time.Time
}

func newOldestPending(now func() time.Time) *oldestPending {
	return &oldestPending{
		desc: prometheus.NewDesc("dibs_oldest_pending_seconds",
			"Age of the oldest claim accepted and not yet issued that this instance's consumers hold, by promotion; 0 when they hold none.",
			[]string{"promotion"}, nil),
		now: now,
		by:  make(map[string]map[string]standing),
	}
}

// report records consumer's report h of promotion id.
func (o *oldestPending) report(id, consumer string, h Handling) {
	o.mu.Lock()
	defer o.mu.Unlock()
	cs := o.by[id]
	if cs == nil {
		cs = make(map[string]standing)
		o.by[id] = cs
	}
	if h.Oldest.IsZero() {
		delete(cs, consumer)
		return
	}
	s := standing{oldest: h.Oldest}
	if h.Hold > 0 {
		s.until = o.now().Add(h.Hold)
	}
	cs[consumer] = s
}

// forget drops promotion id's reports and its series.
func (o *oldestPending) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.by, id)
}

// ages returns each reporting promotion's age of its oldest claim not yet
// issued, dropping the reports that lapsed.
func (o *oldestPending) ages() map[string]time.Duration {
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]time.Duration, len(o.by))
	for id, cs := range o.by {
		var oldest time.Time
		for c, s := range cs {
			if !s.until.IsZero() && !now.Before(s.until) {
				delete(cs, c)
				continue
			}
			if oldest.IsZero() || s.oldest.Before(oldest) {
				oldest = s.oldest
			}
		}
		out[id] = 0
		if !oldest.IsZero() {
			out[id] = max(now.Sub(oldest), 0)
		}
	}
	return out
}

// Describe implements prometheus.Collector.
func (o *oldestPending) Describe(ch chan<- *prometheus.Desc) { ch <- o.desc }

// Collect implements prometheus.Collector.
func (o *oldestPending) Collect(ch chan<- prometheus.Metric) {
	for id, age := range o.ages() {
		ch <- prometheus.MustNewConstMetric(o.desc, prometheus.GaugeValue, age.Seconds(), id)
	}
}

// DeadLetterCounter counts the dead letters waiting for an operator, per
// promotion (store.Store does).
type DeadLetterCounter interface {
	UnhandledDeadLetters(ctx context.Context) (map[string]int64, error)
}

const (
	// DeadLetterCountInterval is the least time between two reads of the
	// unhandled dead letters: scrapes closer together are answered with the
	// last count.
	DeadLetterCountInterval = 10 * time.Second
	// deadLetterCountTimeout bounds one read.
	deadLetterCountTimeout = 2 * time.Second
)

// unhandledDeadLetters is the collector of dibs_dead_letters_unhandled;
// scrapes take turns under mu.
type unhandledDeadLetters struct {
	desc *prometheus.Desc
	c    DeadLetterCounter
	now  func() time.Time

	mu     sync.Mutex
	read   time.Time // when counts were last read
	counts map[string]int64
}

// Describe implements prometheus.Collector.
func (u *unhandledDeadLetters) Describe(ch chan<- *prometheus.Desc) { ch <- u.desc }

// Collect implements prometheus.Collector.
func (u *unhandledDeadLetters) Collect(ch chan<- prometheus.Metric) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if now := u.now(); u.read.IsZero() || now.Sub(u.read) >= DeadLetterCountInterval {
		ctx, cancel := context.WithTimeout(context.Background(), deadLetterCountTimeout)
		counts, err := u.c.UnhandledDeadLetters(ctx)
		cancel()
		if err == nil {
			u.read, u.counts = now, counts
		}
	}
	for id, n := range u.counts {
		if n > 0 {
			ch <- prometheus.MustNewConstMetric(u.desc, prometheus.GaugeValue, float64(n), id)
		}
	}
}
