package stream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/redistest"
	"github.com/dibsio/dibs/internal/wait"
)

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
