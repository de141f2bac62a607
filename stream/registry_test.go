package stream

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/redistest"
	"github.com/dibsio/dibs/internal/wait"
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

// An idle, drained pool stops itself and then makes no Redis calls at all:
// INFO commandstats shows no further XREADGROUP. Fresh server, so other tests
// do not move the count.
func TestIdleStopMakesNoCalls(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			srv := redistest.Fresh(t, redisserver.Options{AppendFsync: "off"})
			tp := redistest.Topology{Name: "fresh", Addrs: []string{srv.Addr()}}
			e := setup(t, tp)
			e.add(t, 20)
			cfg := fastConfig(mode)
			cfg.IdleTimeout = 150 * time.Millisecond
			cfg.MinConsumers, cfg.MaxConsumers = 4, 4
			rec := newRecorder()
			r := newRegistry(t, e.c, "i1", cfg)
			started, err := r.Run(context.Background(), "promo", e.spec(HandlerFunc(func(ctx context.Context, msgs []Message) []error {
				rec.see(ctx, msgs)
				return nil
			})))
			if err != nil || !started {
				t.Fatalf("Run = %v, %v", started, err)
			}
			p := r.Pool("promo")
			select {
			case <-p.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("pool did not stop after its idle timeout")
			}
			if !p.IdleStopped() || r.Running("promo") || rec.count() != 20 || e.pending(t) != 0 {
				t.Fatalf("idle stopped %v, running %v, handled %d, pending %d", p.IdleStopped(), r.Running("promo"), rec.count(), e.pending(t))
			}
			before := commandCalls(t, e.c, "xreadgroup")
			if wait.Until(20*cfg.PollInterval, func() bool { return commandCalls(t, e.c, "xreadgroup") != before }) {
				t.Fatalf("XREADGROUP calls grew after idle stop: %d -> %d", before, commandCalls(t, e.c, "xreadgroup"))
			}
			// New work starts the pool again.
			e.add(t, 1)
			if started, err := r.Run(context.Background(), "promo", e.spec(HandlerFunc(func(ctx context.Context, msgs []Message) []error {
				rec.see(ctx, msgs)
				return nil
			}))); err != nil || !started {
				t.Fatalf("Run after idle stop = %v, %v", started, err)
			}
			wait.For(t, 5*time.Second, "restart handles new work", func() bool { return rec.count() == 21 })
		})
	}
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

// A slow handler within its deadline is not reclaimed by another process.
func TestSlowHandlerNotReclaimed(t *testing.T) {
	e := setup(t, redistest.Topologies(t)[0])
	cfg := fastConfig(ReadPoll)
	cfg.ReclaimMinIdle = 300 * time.Millisecond
	cfg.HandlerTimeout = 140 * time.Millisecond
	cfg.ReclaimInterval = 10 * time.Millisecond
	var calls atomic.Int32
	slow := PerMessage(func(ctx context.Context, m Message) error {
		calls.Add(1)
		<-ctx.Done() // runs until its deadline
		return nil
	})
	e.start(t, "a", Spec{Handler: slow}, cfg)
	e.start(t, "b", Spec{Handler: slow}, cfg)
	e.add(t, 1)
	wait.For(t, 5*time.Second, "handled", func() bool { return calls.Load() >= 1 && e.pending(t) == 0 })
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

// An idle pool with 32 consumers reads about once per interval, not 32
// times: consumers beyond the first park.
func TestIdlePoolReadRate(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			e := setup(t, redistest.Topologies(t)[0])
			cfg := fastConfig(mode)
			cfg.MinConsumers, cfg.MaxConsumers = 32, 32
			cfg.Block = 40 * time.Millisecond
			cfg.PollInterval = 40 * time.Millisecond
			var reads atomic.Int64
			cfg.Hooks.Read = func(string, int) { reads.Add(1) }
			p := e.start(t, "i1", Spec{Handler: PerMessage(func(context.Context, Message) error { return nil })}, cfg)
			if p.Consumers() != 32 {
				t.Fatalf("consumers = %d, want 32", p.Consumers())
			}
			wait.For(t, 5*time.Second, "first reads", func() bool { return reads.Load() >= 32 })
			const extra = 10
			start := time.Now()
			base := reads.Load()
			wait.For(t, 5*time.Second, "further reads", func() bool { return reads.Load() >= base+extra })
			elapsed := time.Since(start)
			// At most one read per interval (poll mode ramps up from a quarter).
			if min := time.Duration(extra-3) * cfg.PollInterval; elapsed < min {
				t.Fatalf("%d reads took %s, want at least %s", extra, elapsed, min)
			}
		})
	}
}

// Acknowledged entries are trimmed, unfinished ones never.
func TestTrimKeepsUnfinished(t *testing.T) {
	e := setup(t, redistest.Topologies(t)[1])
	ids := e.add(t, 30)
	stuck := ids[10]
	cfg := fastConfig(ReadPoll)
	cfg.ReclaimMinIdle = time.Hour
	cfg.HandlerTimeout = time.Second
	cfg.ReclaimInterval = 10 * time.Millisecond
	handled := atomic.Int32{}
	e.start(t, "i1", Spec{Handler: PerMessage(func(_ context.Context, m Message) error {
		handled.Add(1)
		if m.ID == stuck {
			return errors.New("not yet")
		}
		return nil
	})}, cfg)
	wait.For(t, 5*time.Second, "trimmed", func() bool { return handled.Load() == 30 && e.xlen(t, e.stream) == 20 })
	first, err := e.c.Do(context.Background(), e.c.B().Xrange().Key(e.stream).Start("-").End("+").Count(1).Build()).AsXRange()
	if err != nil || len(first) != 1 || first[0].ID != stuck {
		t.Fatalf("first entry = %v, %v; want the pending %s", first, err, stuck)
	}
}

// The pool scales up under a backlog of full batches and back down when the
// stream runs dry.
func TestScalingApplied(t *testing.T) {
	e := setup(t, redistest.Topologies(t)[0])
	cfg := fastConfig(ReadPoll)
	cfg.MinConsumers, cfg.MaxConsumers = 1, 4
	cfg.ConsecutiveActiveTrigger, cfg.ConsecutiveIdleTrigger = 2, 2
	cfg.StartConsumerMinInterval, cfg.StopConsumerMinInterval = time.Millisecond, time.Millisecond
	cfg.PollInterval = 5 * time.Millisecond
	var peak atomic.Int32
	cfg.Hooks.Consumers = func(_ string, n int) {
		for {
			p := peak.Load()
			if int32(n) <= p || peak.CompareAndSwap(p, int32(n)) {
				return
			}
		}
	}
	release := make(chan struct{})
	var handled atomic.Int32
	p := e.start(t, "i1", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		handled.Add(int32(len(msgs)))
		return nil
	})}, cfg)
	e.add(t, 400)
	wait.For(t, 10*time.Second, "scale up to 4", func() bool { return peak.Load() == 4 })
	close(release)
	wait.For(t, 10*time.Second, "drained", func() bool { return handled.Load() == 400 })
	wait.For(t, 10*time.Second, "scale down to 1", func() bool { return p.Consumers() == 1 })
}

// Blocking reads are capped across a registry's pools: with one slot and
// three idle pools, only one XREADGROUP BLOCK is in flight at a time, and the
// others fall back to sleeping.
func TestBlockingConnsCapped(t *testing.T) {
	tp := redistest.Topologies(t)[0]
	c := tp.Client(t)
	cfg := fastConfig(ReadBlock)
	cfg.MaxBlockingConns = 1
	r := newRegistry(t, c, "i1", cfg)
	var handled atomic.Int32 // entry ids repeat across streams: count them
	var envs []env
	for i := range 3 {
		e := setup(t, tp)
		envs = append(envs, e)
		if _, err := r.Run(context.Background(), strconv.Itoa(i), e.spec(HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			handled.Add(int32(len(msgs)))
			return nil
		}))); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, 5*time.Second, "the slot is in use", func() bool { return len(r.blocking) == 1 })
	for _, e := range envs {
		e.add(t, 2)
	}
	wait.For(t, 5*time.Second, "all pools handle work", func() bool { return handled.Load() == 6 })
	if n := len(r.blocking); n > 1 {
		t.Fatalf("blocking slots in use = %d", n)
	}
}
