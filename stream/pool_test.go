package stream

import (
	"context"
	"errors"
	"testing"

	"github.com/dibsio/dibs/internal/startstop"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// A pool answers Start and Stop as every part built on startstop does: a
// second Start and a Start after Stop are refused, Stop is safe twice and
// before Start.
func TestPoolLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t, redistest.Topologies(t)[0])
	spec := e.spec(PerMessage(func(context.Context, Message) error { return nil }))
	ctx := context.Background()
	t.Run("start twice", func(t *testing.T) {
		p, err := NewPool(e.c, "twice", spec, fastConfig(ReadPoll))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Start(ctx); !errors.Is(err, startstop.ErrStarted) {
			t.Fatalf("second Start = %v, want ErrStarted", err)
		}
		stopPool(t, p)
		stopPool(t, p)
		if err := p.Start(ctx); !errors.Is(err, startstop.ErrStopped) {
			t.Fatalf("Start after Stop = %v, want ErrStopped", err)
		}
	})
	t.Run("stop before start", func(t *testing.T) {
		p, err := NewPool(e.c, "before", spec, fastConfig(ReadPoll))
		if err != nil {
			t.Fatal(err)
		}
		stopPool(t, p)
		if err := p.Start(ctx); !errors.Is(err, startstop.ErrStopped) {
			t.Fatalf("Start after Stop = %v, want ErrStopped", err)
		}
		if p.Consumers() != 0 {
			t.Fatalf("consumers = %d, want 0", p.Consumers())
		}
	})
}
