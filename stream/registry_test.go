package stream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/redis/rueidis"
)

func newRegistry(t *testing.T, c rueidis.Client, instance string, cfg Config) *Registry {
	t.Helper()
	r, err := NewRegistry(c, instance, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		r.mu.Lock()
		left := len(r.pools)
		r.mu.Unlock()
		if left != 0 {
			t.Errorf("%d pools left after Stop", left)
		}
	})
	return r
}

func (e env) spec(h Handler) Spec {
	return Spec{Stream: e.stream, Group: e.group, Handler: h}
}

// The idle stop is called off when work arrives while it is being decided.
func TestIdleStopCalledOffByRun(t *testing.T) {
	tp := redistest.Topologies(t)[0]
	e := setup(t, tp)
	r := newRegistry(t, e.c, "i1", fastConfig(ReadPoll))
	if _, err := r.Run(context.Background(), "k", e.spec(PerMessage(func(context.Context, Message) error { return nil }))); err != nil {
		t.Fatal(err)
	}
	p := r.Pool("k")
	seq := p.wakeSeqNow()
	if started, err := r.Run(context.Background(), "k", e.spec(nil)); err != nil || started {
		t.Fatalf("Run of a running pool = %v, %v; want it woken", started, err) // the spec is not looked at
	}
	if p.commitIdle(seq) {
		t.Fatal("idle stop committed although Run came after the group check")
	}
	if !p.commitIdle(p.wakeSeqNow()) {
		t.Fatal("idle stop refused without new work")
	}
	if r.Running("k") {
		t.Fatal("pool still running after an idle stop")
	}
	if p.wake() {
		t.Fatal("a pool that decided to stop took a wake")
	}
	stopPool(t, p)
}

// New work racing idle stops is never stranded: a pool that stops itself
// again and again still handles every entry.
func TestWorkRacingIdleStop(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			e := setup(t, redistest.Topologies(t)[0])
			cfg := fastConfig(mode)
			cfg.IdleTimeout = time.Millisecond
			cfg.PollInterval = 2 * time.Millisecond
			cfg.Block = 5 * time.Millisecond
			rec := newRecorder()
			var stops atomic.Int32
			cfg.Hooks.Consumers = func(_ string, n int) {
				if n == 0 {
					stops.Add(1)
				}
			}
			r := newRegistry(t, e.c, "i1", cfg)
			spec := e.spec(HandlerFunc(func(ctx context.Context, msgs []Message) []error {
				rec.see(ctx, msgs)
				return nil
			}))
			const n = 200
			for i := range n {
				e.add(t, 1)
				if _, err := r.Run(context.Background(), "k", spec); err != nil {
					t.Fatal(err)
				}
				if i%20 == 0 {
					// Let the pool go idle now and then.
					want := stops.Load() + 1
					wait.Until(time.Second, func() bool { return stops.Load() >= want })
				}
			}
			wait.For(t, 10*time.Second, "every entry", func() bool { return rec.count() == n })
			if stops.Load() < 2 {
				t.Fatalf("pool stopped %d times; the race was not exercised", stops.Load())
			}
		})
	}
}

// Stop stops reading, lets in-flight handlers finish, and loses nothing:
// a new process handles the rest.
func TestRegistryStopLosesNothing(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		const n = 50
		e.add(t, n)
		cfg := fastConfig(mode)
		cfg.MinConsumers, cfg.MaxConsumers = 2, 2
		cfg.BatchSize = 5
		rec := newRecorder()
		entered := make(chan struct{}, 64)
		release := make(chan struct{})
		slow := HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			entered <- struct{}{}
			<-release
			rec.see(ctx, msgs)
			return nil
		})
		r1, err := NewRegistry(e.c, "i1", cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r1.Run(context.Background(), "k", e.spec(slow)); err != nil {
			t.Fatal(err)
		}
		<-entered
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut := make(chan error, 1)
		go func() { shut <- r1.Stop(ctx) }()
		wait.For(t, 5*time.Second, "the stop began", func() bool { return !r1.Running("k") })
		close(release)
		if err := <-shut; err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if _, err := r1.Run(context.Background(), "k", e.spec(slow)); !errors.Is(err, ErrShutdown) {
			t.Fatalf("Run after stop = %v, want ErrShutdown", err)
		}
		first := rec.count()
		if first == 0 || first == n {
			t.Fatalf("handled %d before the stop; want some but not all", first)
		}
		r2 := newRegistry(t, e.c, "i1", cfg)
		if _, err := r2.Run(context.Background(), "k", e.spec(HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			rec.see(ctx, msgs)
			return nil
		}))); err != nil {
			t.Fatal(err)
		}
		wait.For(t, 10*time.Second, "all entries", func() bool { return rec.count() == n })
		wait.For(t, 5*time.Second, "nothing pending", func() bool { return e.pending(t) == 0 })
	})
}

// StopPool and Stop are idempotent and safe together.
func TestStopIdempotent(t *testing.T) {
	e := setup(t, redistest.Topologies(t)[0])
	r := newRegistry(t, e.c, "i1", fastConfig(ReadBlock))
	if _, err := r.Run(context.Background(), "k", e.spec(PerMessage(func(context.Context, Message) error { return nil }))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := r.StopPool(ctx, "k"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Go(func() {
		if err := r.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	if err := r.StopPool(ctx, "k"); err != nil || r.Running("k") {
		t.Fatalf("stop again = %v, running %v", err, r.Running("k"))
	}
	p, err := NewPool(e.c, "i1", e.spec(PerMessage(func(context.Context, Message) error { return nil })), fastConfig(ReadBlock))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("stop before start: %v", err)
	}
	<-p.Done()
	if err := p.Start(ctx); err == nil {
		t.Fatal("start after stop succeeded")
	}
}

// A Stop that times out leaves its pool finishing a slow handler; a new pool
// of the key, and one started after that one was stopped in turn, must wait
// for it: the key's handler never runs twice at once, and the entry the slow
// handler could not acknowledge is handled again once it has returned.
func TestRestartAfterTimedOutStopNeverOverlaps(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			e := setup(t, redistest.Topologies(t)[0])
			e.add(t, 1)
			var running, peak, calls atomic.Int32
			entered := make(chan struct{}, 1)
			release := make(chan struct{})
			// The first call ignores its deadline until released: a handler
			// stuck in a call that does not honour cancellation.
			h := HandlerFunc(func(ctx context.Context, msgs []Message) []error {
				n := running.Add(1)
				defer running.Add(-1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				calls.Add(1)
				select {
				case entered <- struct{}{}:
				default:
				}
				<-release
				return nil
			})
			r := newRegistry(t, e.c, "i1", fastConfig(mode))
			var releaseOnce sync.Once
			unblock := func() { releaseOnce.Do(func() { close(release) }) }
			t.Cleanup(unblock) // before the registry's Stop, even on failure
			ensure := func() {
				t.Helper()
				if _, err := r.Run(context.Background(), "k", e.spec(h)); err != nil {
					t.Fatal(err)
				}
			}
			stop := func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
				defer cancel()
				return r.StopPool(ctx, "k")
			}
			ensure()
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				t.Fatal("the handler was not called")
			}
			if err := stop(); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("stop with a slow handler = %v, want the deadline", err)
			}
			ensure()
			_ = stop() // times out too once it waits for the first pool
			ensure()
			if wait.Until(500*time.Millisecond, func() bool { return peak.Load() > 1 }) {
				t.Fatalf("the key's handler ran %d times at once", peak.Load())
			}
			unblock()
			// The first pool could not acknowledge (its Stop's deadline
			// cancelled the ack); the newest pool handles the entry again.
			wait.For(t, 10*time.Second, "the entry handled again and acknowledged", func() bool {
				return calls.Load() >= 2 && e.pending(t) == 0
			})
			if n := peak.Load(); n != 1 {
				t.Fatalf("the key's handler ran %d times at once", n)
			}
		})
	}
}
