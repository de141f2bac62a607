package promotion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dibsio/dibs/internal/hint"
	"github.com/dibsio/dibs/stream"
)

// wakeBacklog bounds the pools waiting for the waker; a wake that finds it
// full is dropped, and the next re-check starts the pool.
const wakeBacklog = 1024

// waker starts or wakes the confirmation pools that claims and hints
// queue on its queue, and carries this instance's side of the hints: it
// takes the bus's hints and tells the other instances of new work and of
// changes. runWaker is its goroutine, the rest is called from anywhere
// and never blocks (but tellChanged, which publishes a hint).
type waker struct {
	known *published
	asks  asks
	// queue carries the handles of the pools to start or wake to runWaker;
	// bounded, senders never block (a handle is in it at most once, see
	// handle.queued).
	queue chan *handle
	reg   *stream.Registry
	hints *hint.Bus // nil with Config.DisableHints
	sold  *soldMemory
	log   *slog.Logger
}

func newWaker(known *published, a asks, reg *stream.Registry, hints *hint.Bus, sold *soldMemory, log *slog.Logger) waker {
	return waker{known: known, asks: a, queue: make(chan *handle, wakeBacklog), reg: reg, hints: hints, sold: sold, log: log}
}

// wakePool makes sure promotion id's confirmation pool runs, without
// blocking and without a lock: the promotion's handle goes to the waker,
// or, for a promotion the loop has not published yet, the loop is asked to
// read it. A wake that cannot be queued is dropped: the next re-check
// starts any pool with work. If the waker starts the pool, it tells the
// other instances (see hinted).
func (wk *waker) wakePool(id string) { wk.queueWake(id, true) }

// hinted takes a hint from another instance (or this one) off the bus:
// a work hint wakes or starts the promotion's pool like a claim here
// would, without telling the others again; a changed hint drops what this
// instance cached about the promotion (see forgetCached) and asks the loop
// to hand the changed definition to its running pools (askRefresh). Never
// blocks.
func (wk *waker) hinted(h hint.Hint) {
	switch h.Kind {
	case hint.Work:
		wk.queueWake(h.Key, false)
	case hint.Changed:
		wk.forgetCached(h.Key)
		// The loop reads the promotion again for its running pools; if
		// its backlog is full, the next re-check does.
		wk.asks.send(ask{kind: askRefresh, id: h.Key, asked: time.Now()})
	}
}

// queueWake is wakePool; tell says whether the waker tells the other
// instances if it starts the pool.
func (wk *waker) queueWake(id string, tell bool) {
	h := wk.known.lookup(id)
	if h == nil {
		// A hint names only promotions the bus listens for: one unknown
		// now was drained meanwhile.
		if tell {
			wk.asks.send(ask{kind: askPool, id: id, asked: time.Now()})
		}
		return
	}
	// Loads first: a busy promotion's claims find both set already and
	// write nothing to the shared handle.
	if h.quietUntil.Load() != woken {
		h.quietUntil.Store(woken)
	}
	if tell && !h.tell.Load() {
		h.tell.Store(true)
	}
	if !h.queued.CompareAndSwap(false, true) {
		return // a wake is queued and has not started yet: it covers this one
	}
	select {
	case wk.queue <- h:
	default:
		h.queued.Store(false)
	}
}

// runWaker starts or wakes the pools claims and hints queued until ctx
// ends. When it starts a pool for work this instance added, the other
// instances' pools of the promotion may be stopped too (idle): it tells
// them with one SPUBLISH. While the pool runs, claims publish nothing; a
// busy promotion costs no hint traffic.
func (wk *waker) runWaker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case h := <-wk.queue:
			h.queued.Store(false)
			tell := h.tell.Swap(false)
			started, err := wk.startOrWakePool(ctx, h)
			if err != nil && ctx.Err() == nil {
				// The re-check retries within a second.
				wk.log.Warn("cannot start confirmation pool", "promotion", h.id, "err", err)
			}
			if started && tell && wk.hints != nil {
				hctx, cancel := context.WithTimeout(ctx, hintTimeout)
				if err := wk.hints.Publish(hctx, h.id, hint.Work); err != nil && ctx.Err() == nil {
					// The other instances' re-checks find the work.
					wk.log.Warn("cannot tell other instances of new claims", "promotion", h.id, "err", err)
				}
				cancel()
			}
		}
	}
}

// startOrWakePool starts the promotion's confirmation pool if it is not
// running and wakes it if it is; it reports whether it started one.
// Called by the loop and the waker only.
func (wk *waker) startOrWakePool(ctx context.Context, h *handle) (bool, error) {
	if h == nil {
		return false, nil
	}
	// Run wakes a running pool under the registry's lock, which also
	// calls off an idle stop being decided at that moment, and starts a
	// stopped one: so new work is never left waiting for the re-check.
	started, err := wk.reg.Run(ctx, h.id, h.spec)
	if err != nil && !errors.Is(err, stream.ErrShutdown) {
		return false, fmt.Errorf("start pool of %s: %w", h.id, err)
	}
	return started, nil
}

// tellChanged tells every instance, this one included, that promotion id
// changed: each drops what it cached about it (its quiet mark here) and
// re-checks it at the next tick. A lost hint costs at most a quiet
// re-check interval.
func (wk *waker) tellChanged(ctx context.Context, id string) {
	wk.hinted(hint.Hint{Key: id, Kind: hint.Changed})
	if wk.hints == nil {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, hintTimeout)
	defer cancel()
	if err := wk.hints.Publish(hctx, id, hint.Changed); err != nil {
		wk.log.WarnContext(ctx, "cannot tell other instances of a changed promotion", "promotion", id, "err", err)
	}
}

// forgetCached drops what this instance cached about promotion id because
// it changed: a quiet promotion becomes ordinary at once, and the sold-out
// memory forgets it. Never blocks.
func (wk *waker) forgetCached(id string) {
	wk.sold.forgetSoldOut(id)
	if h := wk.known.lookup(id); h != nil {
		h.quietUntil.Store(woken)
		h.codes.Store(0)
	}
}
