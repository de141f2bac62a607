package stream

import (
	"context"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/redistest"
	"github.com/dibsio/dibs/internal/wait"
)

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
