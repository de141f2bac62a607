package promotion_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// scrapeClock is a clock the test moves; safe for concurrent use.
type scrapeClock struct{ ns atomic.Int64 }

func (c *scrapeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *scrapeClock) set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *scrapeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// sample is the value of series (name{labels}) in g's exposition, and
// whether it is there.
func sample(t *testing.T, g prometheus.Gatherer, series string) (float64, bool) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(exposition(t, g))
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", series, err)
	}
	return v, true
}

// waitSample waits until series reads want.
func waitSample(t *testing.T, g prometheus.Gatherer, series string, want float64) {
	t.Helper()
	var got float64
	var ok bool
	if !wait.Until(30*time.Second, func() bool {
		got, ok = sample(t, g, series)
		return ok && got == want
	}) {
		t.Fatalf("%s = %v (present %v), want %v:\n%s", series, got, ok, want, exposition(t, g))
	}
}

// TestOldestPendingAndRemaining: on two instances of one promotion, while
// the database refuses to issue, dibs_oldest_pending_seconds counts from
// the first claim accepted and grows with the clock; once the claims are
// issued it falls back to 0 within SettleHold. dibs_remaining follows each
// instance's last answer: the stock an accepted claim left, 0 after a
// sold-out answer.
func TestOldestPendingAndRemaining(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	held := holdIssuance(w.st)
	w.st = held
	clock := &scrapeClock{}
	type instance struct {
		m   *promotion.Manager
		reg *prometheus.Registry
	}
	start := func(name string) instance {
		reg := prometheus.NewRegistry()
		pm := promotion.NewMetrics(reg, w.prefix)
		promotion.SetMetricsClock(pm, clock.now)
		m := w.startManager(t, promotion.Config{Instance: name,
			OnRemaining: pm.Remaining, OnHandling: pm.Handling, OnDrained: pm.Drained})
		return instance{m, reg}
	}
	a, b := start("a"), start("b")
	ctx := context.Background()
	create(t, a.m, promotion.Promotion{ID: "lag", Stock: 4, PerUserLimit: 1})

	var first time.Time
	for i := 1; i <= 3; i++ {
		c, err := a.m.Claim(ctx, "lag", fmt.Sprintf("u%d", i), "")
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if i == 1 {
			first = c.AcceptedAt
		}
		if v, _ := sample(t, a.reg, `dibs_remaining{promotion="lag"}`); v != float64(4-i) {
			t.Fatalf("after claim %d: dibs_remaining %v, want %d", i, v, 4-i)
		}
	}
	clock.set(first.Add(90 * time.Second))
	// One instance or the other holds the first claim, retrying it while
	// the database refuses: the oldest of the instances' ages is its age.
	oldest := func() float64 {
		va, _ := sample(t, a.reg, `dibs_oldest_pending_seconds{promotion="lag"}`)
		vb, _ := sample(t, b.reg, `dibs_oldest_pending_seconds{promotion="lag"}`)
		return max(va, vb)
	}
	wait.For(t, 30*time.Second, "the first claim's age, 90s", func() bool { return oldest() == 90 })
	// 30s later (the consumer's retries, a moment apart, report it again):
	// still not issued.
	clock.advance(30 * time.Second)
	wait.For(t, 30*time.Second, "the first claim's age, 120s", func() bool { return oldest() == 120 })

	if _, err := b.m.Claim(ctx, "lag", "u4", ""); err != nil {
		t.Fatal(err)
	}
	waitSample(t, b.reg, `dibs_remaining{promotion="lag"}`, 0)
	if _, err := a.m.Claim(ctx, "lag", "u5", ""); !errors.Is(err, promotion.ErrSoldOut) {
		t.Fatalf("claim past the stock: %v, want sold out", err)
	}
	waitSample(t, a.reg, `dibs_remaining{promotion="lag"}`, 0)

	held.releaseIssuance()
	waitCounts(t, a.m, "lag", 4, 0)
	// A consumer may still be retrying a claim the other instance issued
	// (it finds it issued): its report lapses too.
	clock.advance(promotion.SettleHold)
	wait.For(t, 30*time.Second, "no claim pending on either instance", func() bool {
		clock.advance(time.Second)
		return oldest() == 0
	})
}

// TestUnhandledDeadLetters: dibs_dead_letters_unhandled counts the failed
// dead letters the database holds, read at most every
// DeadLetterCountInterval, and leaves /metrics once they are voided or
// replayed — not after a while.
func TestUnhandledDeadLetters(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			ctx := context.Background()
			reg := prometheus.NewRegistry()
			pm := promotion.NewMetrics(reg, w.prefix)
			clock := &scrapeClock{}
			clock.set(time.Now())
			promotion.SetMetricsClock(pm, clock.now)
			pm.CountDeadLetters(w.st)
			const series = `dibs_dead_letters_unhandled{promotion="dl"}`
			if _, ok := sample(t, reg, series); ok {
				t.Fatal("a series before any dead letter")
			}
			for i := 1; i <= 3; i++ {
				d := store.DeadLetter{ClaimID: fmt.Sprintf("dl#%d", i), PromotionID: "dl", UserID: fmt.Sprintf("u%d", i),
					Rank: int64(i), Slot: 1, Reason: "permanent: test", Deliveries: 1, State: store.DeadFailed, At: clock.now()}
				if err := w.st.RecordDeadLetter(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			// Read at most once per interval.
			if _, ok := sample(t, reg, series); ok {
				t.Fatal("read again before DeadLetterCountInterval passed")
			}
			clock.advance(promotion.DeadLetterCountInterval)
			if v, _ := sample(t, reg, series); v != 3 {
				t.Fatalf("%s = %v, want 3", series, v)
			}
			if _, err := w.st.TransitionDeadLetters(ctx, "dl", []string{"dl#1"}, store.DeadVoided); err != nil {
				t.Fatal(err)
			}
			clock.advance(time.Hour) // no time heals them
			if v, _ := sample(t, reg, series); v != 2 {
				t.Fatalf("after a void and an hour: %s = %v, want 2", series, v)
			}
			if _, err := w.st.TransitionDeadLetters(ctx, "dl", nil, store.DeadReplayed); err != nil {
				t.Fatal(err)
			}
			clock.advance(promotion.DeadLetterCountInterval)
			if v, ok := sample(t, reg, series); ok {
				t.Fatalf("every dead letter handled, yet %s = %v", series, v)
			}
		})
	}
}

// TestSettledReport: what a consumer holds once the issuer answered.
func TestSettledReport(t *testing.T) {
	t.Parallel()
	at := func(ms int64) stream.Message {
		return stream.Message{Fields: map[string]string{"at": strconv.FormatInt(ms, 10)}}
	}
	msgs := []stream.Message{at(3000), at(1000), at(2000), {Fields: map[string]string{"at": "x"}}}
	transient := stream.Transient(errors.New("db down"))
	permanent := stream.Permanent(errors.New("conflict"))
	malformed := stream.Malformed(errors.New("bad"))
	other := errors.New("of no kind")
	const reclaim = 30 * time.Second
	for _, tc := range []struct {
		name string
		errs []error
		want promotion.Handling
	}{
		{"all issued: the newest, briefly", make([]error, 4), promotion.Handling{Oldest: time.UnixMilli(3000), Hold: promotion.SettleHold}},
		{"dead letters are settled", []error{permanent, malformed, nil, malformed}, promotion.Handling{Oldest: time.UnixMilli(3000), Hold: promotion.SettleHold}},
		{"transient: the oldest retried", []error{transient, nil, transient, nil}, promotion.Handling{Oldest: time.UnixMilli(2000), Hold: reclaim}},
		{"no kind: pending until reclaimed", []error{nil, other, nil, nil}, promotion.Handling{Oldest: time.UnixMilli(1000), Hold: reclaim}},
		{"panic: all pending", nil, promotion.Handling{Oldest: time.UnixMilli(1000), Hold: reclaim}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := promotion.Settled(msgs, tc.errs, reclaim); !got.Oldest.Equal(tc.want.Oldest) || got.Hold != tc.want.Hold {
				t.Errorf("got %v for %v, want %v for %v", got.Oldest, got.Hold, tc.want.Oldest, tc.want.Hold)
			}
		})
	}
}
