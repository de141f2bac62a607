package promotion

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dibsio/dibs/claim"
)

// newTestLoopClient is a loop client whose loop runs and whose asks wait
// in a, with the promotion "p" published.
func newTestLoopClient(a asks) (*loopClient, *handle) {
	h := &handle{id: "p"}
	known := &published{}
	known.replace(map[string]*handle{"p": h})
	lc := &loopClient{asks: a, known: known, openWait: time.Second}
	lc.running.Store(true)
	return lc, h
}

// TestLoopClientWaitsBoundedly: a request that asks the loop to open a
// promotion gets the loop's answer; with no answer within OpenWait, or
// with the loop's backlog full, it gets ErrNotReady; a request that gives
// up gets its context's error. It never blocks on the loop beyond that.
func TestLoopClientWaitsBoundedly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := make(asks, 1)
		lc, _ := newTestLoopClient(a)
		ctx := context.Background()

		answered := make(chan struct{})
		go func() {
			defer close(answered)
			q := <-a
			if q.kind != askOpen || q.id != "p" || q.hasDef {
				t.Errorf("the loop was asked %+v", q)
			}
			q.done <- ErrNotFound
		}()
		if err := lc.awaitOpen(ctx, "p", Promotion{}, false); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the loop answered ErrNotFound; the request got %v", err)
		}
		<-answered

		// Nobody answers: ErrNotReady once OpenWait passed; the ask stays
		// queued, and fills the backlog.
		if err := lc.awaitOpen(ctx, "p", Promotion{}, false); !errors.Is(err, ErrNotReady) {
			t.Fatalf("no answer within OpenWait: %v, want ErrNotReady", err)
		}
		// The backlog is full: ErrNotReady at once, nothing more queued.
		if err := lc.awaitOpen(ctx, "p", Promotion{}, false); !errors.Is(err, ErrNotReady) {
			t.Fatalf("a full backlog: %v, want ErrNotReady", err)
		}
		if len(a) != 1 {
			t.Fatalf("%d asks queued, want 1", len(a))
		}
		// The reports that need no answer never block on a full backlog.
		lc.reportLost("p")
		lc.gateFailed("p", claim.ErrLost)
		lc.awaitRefresh(ctx, "p")
		<-a

		// A request that gives up gets its context's error.
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			<-a // taken by the loop, which has not answered yet
			cancel()
		}()
		if err := lc.awaitOpen(cctx, "p", Promotion{}, false); !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled request: %v, want context.Canceled", err)
		}
	})
}

// TestLoopClientReports: a gate call's error tells the loop what it says
// of the promotion: Redis lost its writes (askLost), or it is rebuilding
// (its quiet mark is dropped, so the next re-check looks at it).
func TestLoopClientReports(t *testing.T) {
	a := make(asks, 4)
	lc, h := newTestLoopClient(a)
	h.quietUntil.Store(time.Now().Add(time.Hour).UnixNano())

	lc.gateFailed("p", nil)
	lc.gateFailed("p", claim.ErrSoldOut)
	if len(a) != 0 || h.quietUntil.Load() == woken {
		t.Fatalf("an answer that tells nothing of Redis reached the loop (%d asks) or the quiet mark", len(a))
	}
	lc.gateFailed("p", claim.ErrRebuilding)
	if h.quietUntil.Load() != woken {
		t.Fatal("a rebuilding promotion kept its quiet mark")
	}
	lc.gateFailed("p", claim.ErrLost)
	if q := <-a; q.kind != askLost || q.id != "p" {
		t.Fatalf("Redis lost writes: the loop was asked %+v, want askLost", q)
	}

	// No loop runs: a refresh is not asked for (no pool runs either).
	lc.running.Store(false)
	lc.awaitRefresh(context.Background(), "p")
	if len(a) != 0 {
		t.Fatal("a refresh was asked of a loop that does not run")
	}
}
