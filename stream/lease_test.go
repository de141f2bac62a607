package stream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
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
	cfg.BatchWait = 0 // the test clock moves only for the lease: no timer may hold a batch
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

// Two live processes with the same instance name never share a consumer
// name; a restarted process resumes its own pending entries.
func TestSameInstanceTwoProcesses(t *testing.T) {
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, tp)
			cfg := fastConfig(ReadPoll)
			cfg.MinConsumers, cfg.MaxConsumers = 2, 2
			noop := PerMessage(func(context.Context, Message) error { return nil })
			a := e.start(t, "same", Spec{Handler: noop}, cfg)
			b := e.start(t, "same", Spec{Handler: noop}, cfg)
			names := map[string]bool{}
			for _, p := range []*Pool{a, b} {
				for _, c := range p.liveConsumers() {
					if names[c.name] {
						t.Errorf("consumer name %s used by both processes", c.name)
					}
					names[c.name] = true
				}
			}
			if len(names) != 4 {
				t.Fatalf("consumer names %v, want 4 distinct", names)
			}
		})
	}
	t.Run("restart resumes own entries", func(t *testing.T) {
		t.Parallel()
		e := setup(t, redistest.Topologies(t)[0])
		ids := e.add(t, 3)
		cfg := fastConfig(ReadPoll)
		cfg.ReclaimMinIdle = time.Hour // only the own-PEL drain can redeliver
		cfg.HandlerTimeout = time.Second
		failed := make(chan struct{}, 8)
		cfg.Hooks.Failure = func(string, string) { failed <- struct{}{} }
		first := e.start(t, "i1", Spec{Handler: PerMessage(func(context.Context, Message) error { return errors.New("down") })}, cfg)
		for range 3 {
			<-failed
		}
		stopPool(t, first)
		if e.pending(t) != 3 {
			t.Fatalf("pending after first run = %d, want 3", e.pending(t))
		}
		cfg.Hooks.Failure = nil
		rec := newRecorder()
		e.start(t, "i1", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			rec.see(ctx, msgs)
			return nil
		})}, cfg)
		wait.For(t, 5*time.Second, "resumed", func() bool { return rec.count() == 3 })
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, id := range ids {
			if c := rec.byConsumer["i1-consumer-0"]; c != 3 {
				t.Fatalf("entries by i1-consumer-0 = %d, want 3", c)
			}
			if d := rec.deliveries[id]; len(d) != 1 || d[0] != 2 {
				t.Fatalf("deliveries of %s = %v, want [2]", id, d)
			}
		}
	})
}

// TestStopWithRedisDownIsBounded: a Stop without a deadline while Redis is
// down finishes: no lease renewal waits for a Redis that does not answer.
func TestStopWithRedisDownIsBounded(t *testing.T) {
	t.Parallel()
	srv := redistest.Fresh(t, redisserver.Options{AppendFsync: "off"})
	e := setup(t, redistest.Topology{Name: "fresh", Addrs: []string{srv.Addr()}})
	cfg := fastConfig(ReadPoll)
	cfg.LeaseTTL = 600 * time.Millisecond
	clk := newTestClock()
	cfg.Clock = clk
	p, err := NewPool(e.c, "down", Spec{Stream: e.stream, Group: e.group,
		Handler: HandlerFunc(func(context.Context, []Message) []error { return nil })}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the heartbeat's timer", func() bool { return clk.waiting(cfg.LeaseTTL / 3) })
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	// A heartbeat pass runs into the outage, then the pool is stopped.
	clk.Jump(cfg.LeaseTTL / 3)
	clk.Fire()
	go func() { _ = p.Stop(context.Background()) }()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Stop without a deadline hung while Redis was down")
	}
}

// TestCleanStopReleasesEveryLease: after a clean Stop no lease key is left,
// however a heartbeat pass interleaves with the consumers' exits, so a
// restarted process can take its names at once.
func TestCleanStopReleasesEveryLease(t *testing.T) {
	t.Parallel()
	e := setup(t, redistest.Topologies(t)[0])
	cfg := fastConfig(ReadBlock)
	cfg.MinConsumers, cfg.MaxConsumers = 8, 8
	cfg.LeaseTTL = 60 * time.Millisecond
	left := 0
	for round := 0; round < 40; round++ {
		p, err := NewPool(e.c, "clean", Spec{Stream: e.stream, Group: e.group,
			Handler: HandlerFunc(func(context.Context, []Message) []error { return nil })}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		wait.For(t, 5*time.Second, "8 consumers", func() bool { return p.Consumers() == 8 })
		stopPool(t, p)
		for i := 0; i < 8; i++ {
			n, err := e.c.Do(context.Background(), e.c.B().Exists().Key(LeaseKey(e.stream, ConsumerName("clean", i))).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			left += int(n)
		}
	}
	if left != 0 {
		t.Fatalf("%d lease keys left behind after clean stops", left)
	}
}

// renew plays one heartbeat pass: it extends c's validity to valid from now
// (if positive) and wakes the consumers waiting for a renewal.
func renew(p *Pool, c *consumer, valid time.Duration) {
	if valid > 0 {
		c.validUntil.Store(time.Now().Add(valid).UnixNano())
	}
	p.renewMu.Lock()
	close(p.renewed)
	p.renewed = make(chan struct{})
	p.renewMu.Unlock()
}

// holdLease against the bubble's clock: a consumer whose lease validity ran
// out sends nothing until a heartbeat pass renews it, gives up when the
// lease is lost, and a stopping pool waits for one pass at most. No Redis
// call is made: the test plays the heartbeat.
func TestHoldLeaseExpiry(t *testing.T) {
	t.Parallel()
	newCase := func(t *testing.T) (*Pool, *consumer, *atomic.Int32) {
		t.Helper()
		cfg := fastConfig(ReadPoll)
		var expired atomic.Int32
		cfg.Hooks.Failure = func(_, kind string) {
			if kind == FailureLeaseExpired {
				expired.Add(1)
			}
		}
		p, err := newPool(noRedis{}, "lease", Spec{Stream: "s", Group: "g", Handler: PerMessage(func(context.Context, Message) error { return nil })},
			cfg.withDefaults(), "token", make(chan struct{}, 1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.hardCancel)
		c := newConsumer(0, "lease-consumer-0", "s:lease:lease-consumer-0")
		c.validUntil.Store(time.Now().Add(time.Second).UnixNano())
		return p, c, &expired
	}
	t.Run("valid", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, c, expired := newCase(t)
			left, ok := p.holdLease(c, false)
			if !ok || left != time.Second || expired.Load() != 0 {
				t.Fatalf("holdLease = %s, %v (expired reports %d); want 1s, true, none", left, ok, expired.Load())
			}
		})
	})
	t.Run("expired waits for the renewal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, c, expired := newCase(t)
			time.Sleep(2 * time.Second) // the process froze past its lease
			go func() {
				time.Sleep(3 * time.Second)
				renew(p, c, 0) // a failed pass: still expired
				time.Sleep(time.Second)
				renew(p, c, 2*time.Second)
			}()
			start := time.Now()
			left, ok := p.holdLease(c, false)
			if !ok || left != 2*time.Second || time.Since(start) != 4*time.Second {
				t.Fatalf("holdLease = %s, %v after %s; want 2s, true after the second pass (4s)", left, ok, time.Since(start))
			}
			if n := expired.Load(); n != 1 {
				t.Fatalf("lease-expired reports = %d, want 1", n)
			}
		})
	})
	t.Run("lost while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, c, _ := newCase(t)
			time.Sleep(2 * time.Second)
			go func() {
				time.Sleep(time.Second)
				c.loseLease()
			}()
			if _, ok := p.holdLease(c, true); ok {
				t.Fatal("holdLease held a lost lease")
			}
		})
	})
	t.Run("a stopping pool waits for one pass at most", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, c, _ := newCase(t)
			close(p.halt)
			time.Sleep(2 * time.Second)
			go func() {
				time.Sleep(time.Second)
				renew(p, c, 0) // Redis unreachable: the pass renewed nothing
			}()
			start := time.Now()
			if _, ok := p.holdLease(c, true); ok || time.Since(start) != time.Second {
				t.Fatalf("holdLease for an ack = %v after %s; want false after the one pass (1s)", ok, time.Since(start))
			}
		})
	})
}
