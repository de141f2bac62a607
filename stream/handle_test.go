package stream

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

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
