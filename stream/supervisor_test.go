package stream

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/redis/rueidis"
)

// The roster alone: which consumer polls an empty stream, which park, and
// whom a read that found work wakes.
func TestRoster(t *testing.T) {
	t.Parallel()
	type step struct {
		op    string // "empty", "work", "full", "exit"
		i     int
		act   emptyAction // for empty
		woken []int       // for work, full, exit
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"the first empty read makes the poller", []step{
			{op: "empty", i: 0, act: actPoll},
			{op: "empty", i: 0, act: actPoll},
			{op: "empty", i: 1, act: actPark},
			{op: "empty", i: 2, act: actPark},
		}},
		{"a partial read hands polling to one parked consumer", []step{
			{op: "empty", i: 0, act: actPoll},
			{op: "empty", i: 1, act: actPark},
			{op: "empty", i: 2, act: actPark},
			{op: "work", i: 0, woken: []int{1}},
			{op: "empty", i: 1, act: actPoll},
			{op: "empty", i: 0, act: actPark},
		}},
		{"a full read wakes every parked consumer", []step{
			{op: "empty", i: 0, act: actPoll},
			{op: "empty", i: 1, act: actPark},
			{op: "empty", i: 2, act: actPark},
			{op: "full", i: 0, woken: []int{1, 2}},
			{op: "empty", i: 2, act: actPoll},
		}},
		{"a partial read by a non-poller wakes nobody", []step{
			{op: "empty", i: 0, act: actPoll},
			{op: "empty", i: 1, act: actPark},
			{op: "work", i: 2},
			{op: "empty", i: 2, act: actPark},
		}},
		{"a baton with nobody parked lets the next empty reader read at once", []step{
			{op: "empty", i: 0, act: actPoll},
			{op: "work", i: 0},
			{op: "empty", i: 1, act: actPoll},
			{op: "empty", i: 2, act: actRead},
			{op: "empty", i: 2, act: actPark},
		}},
		{"an exit wakes every parked consumer", []step{
			{op: "empty", i: 0, act: actPoll},
			{op: "empty", i: 1, act: actPark},
			{op: "empty", i: 2, act: actPark},
			{op: "exit", i: 0, woken: []int{1, 2}},
			{op: "empty", i: 1, act: actPoll},
		}},
		{"an exiting parked consumer is not woken", []step{
			{op: "empty", i: 0, act: actPoll},
			{op: "empty", i: 1, act: actPark},
			{op: "empty", i: 2, act: actPark},
			{op: "exit", i: 2, woken: []int{1}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRoster()
			for n, s := range tc.steps {
				switch s.op {
				case "empty":
					if got := r.empty(s.i); got != s.act {
						t.Fatalf("step %d: empty(%d) = %v, want %v", n, s.i, got, s.act)
					}
					continue
				case "work", "full":
					if got := r.work(s.i, s.op == "full"); !slices.Equal(got, s.woken) {
						t.Fatalf("step %d: %s(%d) woke %v, want %v", n, s.op, s.i, got, s.woken)
					}
				case "exit":
					if got := r.exit(s.i); !slices.Equal(got, s.woken) {
						t.Fatalf("step %d: exit(%d) woke %v, want %v", n, s.i, got, s.woken)
					}
				}
			}
		})
	}
}

// noRedis is a client the supervisor tests never call: with the idle stop
// off and a fixed consumer count the supervisor does no I/O.
type noRedis struct{ rueidis.Client }

// supCase is a pool's supervisor running its loop in a synctest bubble, with
// the test playing its consumers.
type supCase struct {
	p        *Pool
	s        *supervisor
	cs       []*consumer
	stopping chan struct{}
	done     chan struct{}
}

func newSupCase(t *testing.T, mode ReadMode, n int) *supCase {
	t.Helper()
	cfg := fastConfig(mode)
	cfg.MinConsumers, cfg.MaxConsumers = n, n
	cfg = cfg.withDefaults()
	p, err := newPool(noRedis{}, "sup", Spec{Stream: "s", Group: "g", Handler: PerMessage(func(context.Context, Message) error { return nil })},
		cfg, "token", make(chan struct{}, cfg.MaxBlockingConns))
	if err != nil {
		t.Fatal(err)
	}
	sc := &supCase{p: p, s: newSupervisor(p), stopping: make(chan struct{}), done: make(chan struct{})}
	for i := range n {
		c := newConsumer(i, ConsumerName("sup", i), LeaseKey("s", ConsumerName("sup", i)))
		sc.s.consumers[i] = c
		sc.cs = append(sc.cs, c)
	}
	go func() {
		defer close(sc.done)
		sc.s.loop(sc.stopping)
	}()
	return sc
}

// read reports a read of n entries by consumer i.
func (sc *supCase) read(i, n int) {
	sc.p.report(sc.cs[i], report{kind: reportRead, n: n, full: n >= sc.p.cfg.BatchSize})
	synctest.Wait()
}

// turn returns consumer i's turn if it has one.
func (sc *supCase) turn(i int) (turn, bool) {
	select {
	case t := <-sc.cs[i].turn:
		return t, true
	default:
		return turn{}, false
	}
}

// stop stops the loop as Stop does, the consumers exiting on the halt.
func (sc *supCase) stop(t *testing.T) {
	t.Helper()
	close(sc.stopping)
	synctest.Wait()
	select {
	case <-sc.p.halt:
	default:
		t.Fatal("the supervisor did not halt the pool on Stop")
	}
	for _, c := range sc.cs {
		if _, ok := sc.s.consumers[c.idx]; !ok {
			continue
		}
		sc.p.report(c, report{kind: reportExit})
		<-c.removed
	}
	<-sc.done
}

// The poller's turns come after the poll delay, which grows from a quarter
// of the interval to the whole; the other consumers park meanwhile, a Wake
// cuts the sleep short, and a partial read hands polling on to one parked
// consumer. The supervisor's clock is the bubble's.
func TestSupervisorPollTurns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sc := newSupCase(t, ReadPoll, 3)
		interval := sc.p.cfg.PollInterval
		for n, want := range []time.Duration{interval / 4, interval / 2, interval, interval} {
			start := time.Now()
			sc.read(0, 0)
			if _, ok := sc.turn(0); ok {
				t.Fatalf("empty read %d: the poller got a turn at once", n+1)
			}
			time.Sleep(want)
			synctest.Wait()
			tn, ok := sc.turn(0)
			if !ok || !tn.poll || time.Since(start) != want {
				t.Fatalf("empty read %d: turn %v, %v after %s; want a poll turn after %s", n+1, tn, ok, time.Since(start), want)
			}
		}
		sc.read(1, 0)
		sc.read(2, 0)
		if _, ok := sc.turn(1); ok {
			t.Fatal("a second consumer got a turn on an empty stream; want it parked")
		}
		sc.read(0, 0)
		sc.p.Wake()
		synctest.Wait()
		if _, ok := sc.turn(0); !ok {
			t.Fatal("Wake did not cut the poller's sleep short")
		}
		sc.read(0, 3) // partial: one parked consumer takes over
		_, woke1 := sc.turn(1)
		_, woke2 := sc.turn(2)
		if !woke1 || woke2 {
			t.Fatalf("after a partial read woken: consumer 1 %v, consumer 2 %v; want only 1", woke1, woke2)
		}
		sc.read(1, 0)
		time.Sleep(interval / 4)
		synctest.Wait()
		if tn, ok := sc.turn(1); !ok || !tn.poll {
			t.Fatal("the woken consumer did not take over polling")
		}
		sc.stop(t)
	})
}

// A full batch wakes every parked consumer; the poller's exit wakes them
// too, and the pool stops once its last consumer is gone.
func TestSupervisorFullBatchAndExits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sc := newSupCase(t, ReadPoll, 3)
		sc.read(0, 0)
		sc.read(1, 0)
		sc.read(2, 0)
		sc.read(0, sc.p.cfg.BatchSize)
		for i := 1; i <= 2; i++ {
			if _, ok := sc.turn(i); !ok {
				t.Fatalf("consumer %d not woken by a full batch", i)
			}
		}
		sc.read(1, 0) // 1 polls
		sc.read(2, 0) // 2 parks
		sc.p.report(sc.cs[1], report{kind: reportExit})
		<-sc.cs[1].removed
		synctest.Wait()
		if _, ok := sc.turn(2); !ok {
			t.Fatal("the poller's exit did not wake the parked consumer")
		}
		if n := sc.p.Consumers(); n != 2 {
			t.Fatalf("consumers = %d after an exit, want 2", n)
		}
		for _, i := range []int{0, 2} {
			sc.p.report(sc.cs[i], report{kind: reportExit})
			<-sc.cs[i].removed
		}
		<-sc.done
		if !sc.p.halted() || !sc.p.isClosing() || sc.p.wake() {
			t.Fatal("a pool without consumers is not stopping")
		}
	})
}

// In block mode the poller's turn comes at once with a blocking read and one
// of the shared slots, which it gives back after the read.
func TestSupervisorBlockTurn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		sc := newSupCase(t, ReadBlock, 2)
		sc.read(0, 0)
		tn, ok := sc.turn(0)
		if !ok || tn.block != sc.p.cfg.Block || len(sc.p.blocking) != 1 {
			t.Fatalf("turn %+v, %v, slots in use %d; want a blocking turn holding one slot", tn, ok, len(sc.p.blocking))
		}
		sc.p.giveBackSlot(tn)
		if len(sc.p.blocking) != 0 {
			t.Fatal("the slot was not given back")
		}
		sc.stop(t)
	})
}

// The idle stop asks Redis for the group's pending count and lag, so it
// cannot run in a synctest bubble (a network read is not durably blocking);
// its timer is the pure idleDue (policy_test.go), and the stop itself is
// tested against Redis here and in registry_test.go.

// The pool scales up under a backlog of full batches and back down when the
// stream runs dry.
func TestScalingApplied(t *testing.T) {
	e := setup(t, redistest.Topologies(t)[0])
	cfg := fastConfig(ReadPoll)
	cfg.MinConsumers, cfg.MaxConsumers = 1, 4
	cfg.BatchSize = 10 // 400 entries make 40 full batches
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

// TestTrickleAfterScaleDown: a backlog scales the pool up, then entries
// arrive one at a time, so partial reads scale it down meanwhile. The
// consumer that stays must never be left parked with nobody polling — a
// regression test for a scaled-down consumer that had just handed the
// poller role on.
func TestTrickleAfterScaleDown(t *testing.T) {
	t.Parallel()
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		cfg := fastConfig(mode)
		cfg.MinConsumers, cfg.MaxConsumers = 1, 4
		cfg.ConsecutiveActiveTrigger, cfg.ConsecutiveIdleTrigger = 2, 2
		cfg.StartConsumerMinInterval, cfg.StopConsumerMinInterval = time.Millisecond, time.Millisecond
		rec := newRecorder()
		p := e.start(t, "trickle", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			rec.see(ctx, msgs)
			return nil
		})}, cfg)
		e.add(t, 200)
		wait.For(t, 10*time.Second, "the backlog", func() bool { return rec.count() == 200 })
		// Partial reads scale the pool down while entries keep arriving,
		// one at a time, each waited for.
		for i := 1; i <= 60; i++ {
			e.add(t, 1)
			p.Wake()
			wait.For(t, 5*time.Second, "the trickle", func() bool { return rec.count() == 200+i })
		}
		if n := p.Consumers(); n != 1 {
			t.Logf("%d consumers after the trickle", n)
		}
	})
}

// TestTrickleReadsPerMessage: with 32 consumers and entries arriving one at
// a time, a partial read hands the polling role to one parked consumer, not
// to all of them, so each entry costs a few reads, not one per consumer.
// Fresh server, so INFO commandstats counts this pool's reads only.
func TestTrickleReadsPerMessage(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			srv := redistest.Fresh(t, redisserver.Options{AppendFsync: "off"})
			e := setup(t, redistest.Topology{Name: "fresh", Addrs: []string{srv.Addr()}})
			cfg := fastConfig(mode)
			cfg.MinConsumers, cfg.MaxConsumers = 32, 32
			// Long enough that timed-out polls do not blur the count: the
			// entries, each woken for, drive the reads.
			cfg.Block = 2 * time.Second
			cfg.PollInterval = 2 * time.Second
			rec := newRecorder()
			p := e.start(t, "i1", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
				rec.see(ctx, msgs)
				return nil
			})}, cfg)
			trickle := func(from, n int) {
				t.Helper()
				for i := from + 1; i <= from+n; i++ {
					e.add(t, 1)
					p.Wake()
					wait.For(t, 5*time.Second, "the trickle", func() bool { return rec.count() == i })
				}
			}
			// Warm up: every consumer drains its own entries and reads once.
			trickle(0, 2)
			const n = 30
			before := commandCalls(t, e.c, "xreadgroup")
			trickle(2, n)
			reads := commandCalls(t, e.c, "xreadgroup") - before
			perMsg := float64(reads) / n
			t.Logf("%s: %d XREADGROUP for %d entries (%.1f per entry)", mode, reads, n, perMsg)
			// 4 on a quiet machine; a loaded one adds the odd poll that times
			// out. Handing the role to every parked consumer costs 32.
			if perMsg > 8 {
				t.Fatalf("%.1f reads per entry with 32 consumers, want a few (at most 8), not one per consumer", perMsg)
			}
		})
	}
}
