package stream

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/redistest"
	"github.com/dibsio/dibs/internal/wait"
)

// testClock is a Clock the test moves by hand. Jump moves the time without
// firing timers — a process that was frozen and whose goroutines race its
// timers on waking — and Fire then fires every timer that is due.
type testClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []clockWaiter
}

type clockWaiter struct {
	d  time.Duration
	at time.Time
	ch chan time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Unix(1_700_000_000, 0)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, clockWaiter{d: d, at: c.now.Add(d), ch: ch})
	return ch
}

// Jump moves the time forward by d without firing any timer.
func (c *testClock) Jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// waiting reports whether a timer of d is set and has not fired.
func (c *testClock) waiting(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		if w.d == d {
			return true
		}
	}
	return false
}

// Fire fires the timers that are due.
func (c *testClock) Fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// leaseCase is a pool on a test clock whose single consumer has read once.
type leaseCase struct {
	e       env
	clk     *testClock
	p       *Pool
	rec     *recorder
	expired atomic.Int32 // FailureLeaseExpired reports
}

func setupLease(t *testing.T, mode ReadMode) *leaseCase {
	t.Helper()
	lc := &leaseCase{e: setup(t, redistest.Topologies(t)[0]), clk: newTestClock(), rec: newRecorder()}
	cfg := fastConfig(mode)
	cfg.Clock = lc.clk
	var reads atomic.Int64
	cfg.Hooks.Read = func(string, int) { reads.Add(1) }
	cfg.Hooks.Failure = func(_, kind string) {
		if kind == FailureLeaseExpired {
			lc.expired.Add(1)
		}
	}
	lc.p = lc.e.start(t, "frozen", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
		lc.rec.see(ctx, msgs)
		return nil
	})}, cfg)
	wait.For(t, 5*time.Second, "the first read", func() bool { return reads.Load() >= 1 })
	wait.For(t, 5*time.Second, "the heartbeat's timer", func() bool { return lc.clk.waiting(cfg.LeaseTTL / 3) })
	return lc
}

// freeze makes the process wake from a freeze longer than its lease: the
// clock has moved on, no timer has fired yet, and the consumer is kicked so
// it runs before the heartbeat does. It then adds one entry.
func (lc *leaseCase) freeze(t *testing.T) {
	t.Helper()
	lc.clk.Jump(2 * lc.p.cfg.LeaseTTL)
	lc.p.Wake()
	// Before reading again the consumer finds its lease's validity gone.
	// (Without that check it would simply read on; the entry below then
	// shows it.)
	wait.Until(2*time.Second, func() bool { return lc.expired.Load() > 0 })
	lc.e.add(t, 1)
	lc.p.Wake()
}

// A consumer does not read past its lease's validity: after a freeze it waits
// for the heartbeat, and when the heartbeat finds the name taken by another
// process it stops without ever reading the entries that arrived meanwhile.
func TestLeaseTakenDuringFreezeStopsConsumer(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			lc := setupLease(t, mode)
			e := lc.e
			// The lease expired while the process was frozen, and another
			// process took the name.
			key := LeaseKey(e.stream, ConsumerName("frozen", 0))
			ctx := context.Background()
			if err := e.c.Do(ctx, e.c.B().Del().Key(key).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if err := e.c.Do(ctx, e.c.B().Set().Key(key).Value("another-process").Px(time.Minute).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			lc.freeze(t)
			if wait.Until(300*time.Millisecond, func() bool { return lc.rec.count() > 0 || e.pending(t) > 0 }) {
				t.Fatalf("the consumer read past its lease: handled %d, pending %d", lc.rec.count(), e.pending(t))
			}
			// The heartbeat runs: the name is another process's, so the
			// consumer stops, and with it the pool.
			lc.clk.Fire()
			select {
			case <-lc.p.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("the pool did not stop after losing its only lease: %d consumers", lc.p.Consumers())
			}
			if lc.rec.count() != 0 || e.pending(t) != 0 {
				t.Fatalf("handled %d, pending %d after the lease was lost; want 0, 0", lc.rec.count(), e.pending(t))
			}
			owner, err := e.c.Do(ctx, e.c.B().Get().Key(key).Build()).ToString()
			if err != nil || owner != "another-process" {
				t.Fatalf("lease owner = %q, %v; want the other process's", owner, err)
			}
		})
	}
}

// After a freeze a consumer whose lease is still its own waits for the
// heartbeat's renewal and then goes on.
func TestLeaseRenewedAfterFreezeResumes(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			lc := setupLease(t, mode)
			lc.freeze(t)
			if lc.expired.Load() == 0 {
				t.Fatal("the consumer did not notice its lease's validity ran out")
			}
			if wait.Until(200*time.Millisecond, func() bool { return lc.rec.count() > 0 }) {
				t.Fatal("the consumer read before its lease was renewed")
			}
			lc.clk.Fire()
			wait.For(t, 5*time.Second, "the entry handled after the renewal", func() bool { return lc.rec.count() == 1 })
			wait.For(t, 5*time.Second, "the entry acknowledged", func() bool { return lc.e.pending(t) == 0 })
		})
	}
}
