package stream

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/redistest"
	"github.com/dibsio/dibs/internal/wait"
)

// Distribution: 100 entries over 4 consumers — every consumer gets some, no
// entry twice, all acknowledged.
func TestDistribution(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		e.add(t, 100)
		cfg := fastConfig(mode)
		cfg.MinConsumers, cfg.MaxConsumers = 4, 4
		rec := newRecorder()
		var mu sync.Mutex
		seen := map[string]bool{}
		allSeen := make(chan struct{})
		h := HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			rec.see(ctx, msgs)
			mu.Lock()
			seen[ConsumerFromContext(ctx)] = true
			if len(seen) == 4 {
				select {
				case <-allSeen:
				default:
					close(allSeen)
				}
			}
			mu.Unlock()
			// Hold the batch until every consumer has had one (or give up), so
			// the test shows the others read while one is busy.
			select {
			case <-allSeen:
			case <-time.After(3 * time.Second):
			}
			return nil
		})
		e.start(t, "i1", Spec{Handler: h}, cfg)
		wait.For(t, 10*time.Second, "100 entries", func() bool { return rec.count() == 100 })
		wait.For(t, 5*time.Second, "nothing pending", func() bool { return e.pending(t) == 0 })
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for id, n := range rec.byID {
			if n != 1 {
				t.Errorf("entry %s handled %d times", id, n)
			}
		}
		if len(rec.byConsumer) != 4 {
			t.Errorf("consumers that got entries: %v, want 4", rec.byConsumer)
		}
	})
}

// Manual acknowledgement: entries are pending while the handler runs and
// acknowledged only after it succeeded.
func TestManualAck(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		e.add(t, 5)
		entered := make(chan struct{})
		release := make(chan struct{})
		var once sync.Once
		h := HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			once.Do(func() { close(entered) })
			<-release
			return nil
		})
		e.start(t, "i1", Spec{Handler: h}, fastConfig(mode))
		<-entered
		if got := e.pending(t); got != 5 {
			t.Fatalf("pending while handling = %d, want 5", got)
		}
		close(release)
		wait.For(t, 5*time.Second, "acks", func() bool { return e.pending(t) == 0 })
	})
}

// Failure: a failing handler leaves its entry pending.
func TestFailingHandlerKeepsPending(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		e.add(t, 1)
		cfg := fastConfig(mode)
		failed := make(chan struct{}, 16)
		cfg.Hooks.Failure = func(_, kind string) {
			if kind == FailureError {
				failed <- struct{}{}
			}
		}
		h := PerMessage(func(context.Context, Message) error { return errors.New("boom") })
		e.start(t, "i1", Spec{Handler: h}, cfg)
		<-failed
		if got := e.pending(t); got != 1 {
			t.Fatalf("pending after failure = %d, want 1", got)
		}
		if n := len(e.dlq(t)); n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})
}

// requireMessage is a handler that reports entries without a "message"
// field as malformed.
func requireMessage(rec *recorder) Handler {
	return PerMessage(func(ctx context.Context, m Message) error {
		if _, ok := m.Fields["message"]; !ok {
			return Malformed(errors.New("missing field message"))
		}
		rec.see(ctx, []Message{m})
		return nil
	})
}

// A malformed entry: a malformed entry is dead-lettered at once with
// its reason (not silently acknowledged); the good ones are handled.
func TestMalformedDeadLettered(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		e.add(t, 3)
		bad, err := e.c.Do(context.Background(), e.c.B().Xadd().Key(e.stream).Id("*").FieldValue().
			FieldValue("invalid-key", "invalid-value").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		e.start(t, "i1", Spec{Handler: requireMessage(rec), OnDeadLetter: rec.onDeadLetter}, fastConfig(mode))
		wait.For(t, 5*time.Second, "dead letter", func() bool { return len(e.dlq(t)) == 1 })
		wait.For(t, 5*time.Second, "nothing pending", func() bool { return e.pending(t) == 0 })
		d := e.dlq(t)[0].FieldValues
		if d[DeadLetterFieldID] != bad || !strings.HasPrefix(d[DeadLetterFieldReason], "malformed: missing field message") ||
			d[DeadLetterFieldDeliveries] != "1" || d["invalid-key"] != "invalid-value" {
			t.Fatalf("dead letter entry = %v", d)
		}
		if dl, ok := rec.deadLetters()[bad]; !ok || dl.Deliveries != 1 {
			t.Fatalf("dead-letter callback = %+v (%v)", dl, ok)
		}
		if rec.count() != 3 {
			t.Fatalf("handled %d good entries, want 3", rec.count())
		}
	})
}

// Entries a dead consumer holds are reclaimed by a live one, with their
// delivery count.
func TestReclaimFromDeadConsumer(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		ids := e.add(t, 5)
		// "ghost" reads the entries and dies without acknowledging them.
		if err := e.c.Do(context.Background(), e.c.B().Xreadgroup().Group(e.group, "ghost").Count(10).
			Streams().Key(e.stream).Id(">").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		cfg := fastConfig(mode)
		cfg.ReclaimMinIdle = 300 * time.Millisecond
		cfg.HandlerTimeout = 100 * time.Millisecond
		rec := newRecorder()
		e.start(t, "i1", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			rec.see(ctx, msgs)
			return nil
		})}, cfg)
		wait.For(t, 5*time.Second, "reclaim", func() bool { return rec.count() == 5 })
		wait.For(t, 5*time.Second, "nothing pending", func() bool { return e.pending(t) == 0 })
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, id := range ids {
			if d := rec.deliveries[id]; len(d) != 1 || d[0] != 2 {
				t.Errorf("entry %s deliveries seen %v, want [2]", id, d)
			}
		}
	})
}

// An entry that keeps failing is dead-lettered after MaxDeliveries, with the
// reason and the count.
func TestMaxDeliveries(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		ids := e.add(t, 1)
		cfg := quickReclaimConfig(mode)
		cfg.MaxDeliveries = 3
		rec := newRecorder()
		h := HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			rec.see(ctx, msgs)
			return []error{errors.New("database says no")}
		})
		e.start(t, "i1", Spec{Handler: h, OnDeadLetter: rec.onDeadLetter}, cfg)
		wait.For(t, 10*time.Second, "dead letter", func() bool { return len(e.dlq(t)) == 1 })
		wait.For(t, 5*time.Second, "nothing pending", func() bool { return e.pending(t) == 0 })
		d := e.dlq(t)[0].FieldValues
		if d[DeadLetterFieldDeliveries] != "3" || !strings.Contains(d[DeadLetterFieldReason], "max deliveries (3) reached: database says no") {
			t.Fatalf("dead letter = %v", d)
		}
		if n := rec.calls(ids[0]); n != 3 {
			t.Fatalf("handler calls = %d, want 3", n)
		}
		rec.mu.Lock()
		got := rec.deliveries[ids[0]]
		rec.mu.Unlock()
		if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
			t.Fatalf("deliveries seen %v, want [1 2 3]", got)
		}
	})
}

// Each error kind does what DESIGN.md says.
func TestErrorKinds(t *testing.T) {
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			t.Run("transient retries without counting deliveries", func(t *testing.T) {
				t.Parallel()
				e := setup(t, tp)
				ids := e.add(t, 1)
				cfg := fastConfig(ReadPoll)
				cfg.MaxDeliveries = 1
				var calls atomic.Int32
				rec := newRecorder()
				h := PerMessage(func(ctx context.Context, m Message) error {
					rec.see(ctx, []Message{m})
					if calls.Add(1) <= 3 {
						return Transient(errors.New("database unreachable"))
					}
					return nil
				})
				e.start(t, "i1", Spec{Handler: h}, cfg)
				wait.For(t, 10*time.Second, "success", func() bool { return calls.Load() == 4 })
				wait.For(t, 5*time.Second, "ack", func() bool { return e.pending(t) == 0 })
				rec.mu.Lock()
				got := rec.deliveries[ids[0]]
				rec.mu.Unlock()
				for _, d := range got {
					if d != 1 {
						t.Fatalf("deliveries seen %v, want all 1", got)
					}
				}
				if n := len(e.dlq(t)); n != 0 {
					t.Fatalf("dead letters = %d, want 0", n)
				}
			})
			t.Run("permanent dead-letters at once", func(t *testing.T) {
				t.Parallel()
				e := setup(t, tp)
				e.add(t, 1)
				var calls atomic.Int32
				h := PerMessage(func(context.Context, Message) error {
					calls.Add(1)
					return Permanent(errors.New("promotion deleted"))
				})
				e.start(t, "i1", Spec{Handler: h}, fastConfig(ReadPoll))
				wait.For(t, 5*time.Second, "dead letter", func() bool { return len(e.dlq(t)) == 1 })
				wait.For(t, 5*time.Second, "ack", func() bool { return e.pending(t) == 0 })
				if r := e.dlq(t)[0].FieldValues[DeadLetterFieldReason]; r != "permanent: promotion deleted" {
					t.Fatalf("reason = %q", r)
				}
				if calls.Load() != 1 {
					t.Fatalf("calls = %d, want 1", calls.Load())
				}
			})
			t.Run("panic is a recovered failure", func(t *testing.T) {
				t.Parallel()
				e := setup(t, tp)
				e.add(t, 1)
				cfg := fastConfig(ReadPoll)
				cfg.MaxDeliveries = 1
				h := HandlerFunc(func(context.Context, []Message) []error { panic("nil map") })
				e.start(t, "i1", Spec{Handler: h}, cfg)
				wait.For(t, 5*time.Second, "dead letter", func() bool { return len(e.dlq(t)) == 1 })
				if r := e.dlq(t)[0].FieldValues[DeadLetterFieldReason]; !strings.Contains(r, "handler panicked: nil map") {
					t.Fatalf("reason = %q", r)
				}
			})
			t.Run("unclassified stays pending", func(t *testing.T) {
				t.Parallel()
				e := setup(t, tp)
				e.add(t, 1)
				failed := make(chan struct{}, 4)
				cfg := fastConfig(ReadPoll)
				cfg.Hooks.Failure = func(_, kind string) {
					if kind == FailureError {
						failed <- struct{}{}
					}
				}
				h := PerMessage(func(context.Context, Message) error { return errors.New("unknown") })
				e.start(t, "i1", Spec{Handler: h}, cfg)
				<-failed
				if e.pending(t) != 1 || len(e.dlq(t)) != 0 {
					t.Fatalf("pending %d, dead letters %d; want 1, 0", e.pending(t), len(e.dlq(t)))
				}
			})
		})
	}
}

// One bad entry of a batch never dead-letters the good ones.
func TestBatchWithOneBadEntry(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		ids := e.add(t, 10)
		bad := ids[4]
		done := make(chan struct{})
		var once sync.Once
		h := HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			errs := make([]error, len(msgs))
			for i, m := range msgs {
				if m.ID == bad {
					errs[i] = Permanent(errors.New("bad entry"))
				}
			}
			once.Do(func() { close(done) })
			return errs
		})
		e.start(t, "i1", Spec{Handler: h}, fastConfig(mode))
		<-done
		wait.For(t, 5*time.Second, "settled", func() bool { return e.pending(t) == 0 && len(e.dlq(t)) == 1 })
		if got := e.dlq(t)[0].FieldValues[DeadLetterFieldID]; got != bad {
			t.Fatalf("dead-lettered %s, want %s", got, bad)
		}
	})
}
