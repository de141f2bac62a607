package promotion

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
)

// loopClient is the request side's way to the loop: it asks the loop (over
// its bounded channel) to open a promotion, read one again or rebuild one,
// and waits for the answer at most Config.OpenWait. It never blocks on the
// loop beyond that and never reaches into the loop's state. When no loop
// runs (before Start, after Stop) there is no owner to ask, and it opens a
// promotion itself.
type loopClient struct {
	asks     asks
	known    *published
	st       store.Store
	op       *opener
	openWait time.Duration // Config.OpenWait
	// running is true while the loop runs (from its first re-check to
	// Stop); written by Start and Stop, read by anyone.
	running atomic.Bool
}

// awaitOpen asks the loop to open promotion id (with def, if hasDef) and
// waits for the answer at most Config.OpenWait: ErrNotFound if the
// database has no such promotion, ErrNotReady if the loop did not finish in
// time (or has too much to do), nil once Redis holds the promotion. The
// caller runs no database query — unless no loop runs (before Start or
// after Stop: a program that only creates promotions, say), when there is
// no owner to ask and the caller opens the promotion itself.
func (lc *loopClient) awaitOpen(ctx context.Context, id string, def Promotion, hasDef bool) error {
	if !lc.running.Load() {
		if !hasDef {
			var err error
			if def, err = load(ctx, lc.st, id); err != nil {
				return err
			}
		}
		if def.retired() {
			return errRetired
		}
		return lc.op.open(ctx, def)
	}
	a := ask{kind: askOpen, id: id, def: def, hasDef: hasDef, asked: time.Now(), done: make(chan error, 1)}
	if !lc.asks.send(a) {
		return ErrNotReady
	}
	t := time.NewTimer(lc.openWait)
	defer t.Stop()
	select {
	case err := <-a.done:
		return err
	case <-t.C:
		return ErrNotReady
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitRefresh asks the loop to read promotion id again (askRefresh) and
// waits for it at most Config.OpenWait, so the instance that made a change
// hands it to its running pools before it answers. A refresh that did not
// happen in time (or failed) is done by the next re-check. No-op when no
// loop runs (no pools run either).
func (lc *loopClient) awaitRefresh(ctx context.Context, id string) {
	if !lc.running.Load() {
		return
	}
	a := ask{kind: askRefresh, id: id, asked: time.Now(), done: make(chan error, 1)}
	if !lc.asks.send(a) {
		return
	}
	t := time.NewTimer(lc.openWait)
	defer t.Stop()
	select {
	case <-a.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// reportLost tells the loop that a claim or an issuer found Redis lost
// writes of promotion id: the script marked it rebuilding, and the loop
// starts the rebuild. Never blocks; if the loop's backlog is full, the next
// re-check finds the promotion rebuilding and takes it over.
func (lc *loopClient) reportLost(id string) {
	lc.asks.send(ask{kind: askLost, id: id, asked: time.Now()})
}

// onGate runs a gate call for promotion id. If Redis does not know the
// promotion — an unknown id, one created on another instance a moment ago,
// or one Redis lost — the Manager's loop decides, and this request only
// waits for it (at most Config.OpenWait, else ErrNotReady): an unknown
// promotion is ErrNotFound, a known one is opened (rebuilding if
// the database holds claims of it) and the call runs once more.
func (lc *loopClient) onGate(ctx context.Context, id string, call func() error) error {
	err := call()
	if errors.Is(err, claim.ErrNotFound) {
		if err := lc.awaitOpen(ctx, id, Promotion{}, false); err != nil {
			return err
		}
		err = call()
	}
	lc.gateFailed(id, err)
	return err
}

// gateFailed tells the loop what a gate call's error err says of
// promotion id: Redis lost its writes, or it is rebuilding.
func (lc *loopClient) gateFailed(id string, err error) {
	if errors.Is(err, claim.ErrLost) {
		lc.reportLost(id)
	}
	if errors.Is(err, claim.ErrRebuilding) {
		// Rebuilding, maybe by an instance that died: the next
		// re-check looks at it even if it was idle here, and takes the
		// rebuild over once its hold expires.
		if h := lc.known.lookup(id); h != nil && h.quietUntil.Load() != woken {
			h.quietUntil.Store(woken)
		}
	}
}
