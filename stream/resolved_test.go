package stream

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/redistest"
	"github.com/dibsio/dibs/internal/wait"
)

// TestDeadLetterResolved: an OnDeadLetter callback that finds the work done
// acknowledges the entry itself and returns ErrResolved; no dead letter is
// written and nothing stays pending.
func TestDeadLetterResolved(t *testing.T) {
	t.Parallel()
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		var called atomic.Int32
		spec := Spec{
			Handler: PerMessage(func(context.Context, Message) error {
				return Permanent(errors.New("refused"))
			}),
			OnDeadLetter: func(ctx context.Context, d DeadLetter) error {
				called.Add(1)
				if err := e.c.Do(ctx, e.c.B().Xack().Key(e.stream).Group(e.group).Id(d.ID).Build()).Error(); err != nil {
					return err
				}
				return ErrResolved
			},
		}
		e.start(t, "r1", spec, fastConfig(mode))
		e.add(t, 3)
		wait.For(t, 10*time.Second, "the callbacks", func() bool { return called.Load() == 3 && e.pending(t) == 0 })
		if n := len(e.dlq(t)); n != 0 {
			t.Fatalf("%d dead letters written for resolved entries", n)
		}
	})
}
