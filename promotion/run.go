package promotion

import (
	"context"
	"errors"
	"time"
)

// run is the Manager's owner goroutine; it returns when ctx ends.
func (l *loop) run(ctx context.Context) {
	t := time.NewTicker(l.cfg.RecheckInterval)
	defer t.Stop()
	var lastSweep time.Time // the first tick sweeps: a restart finishes what a crash left
	pe := newPromotionEvents(l.st, l.so, l.cfg.Now, l.log)
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-l.asks:
			l.serve(ctx, a)
		case <-t.C:
			if err := l.recheck(ctx, false); err != nil && ctx.Err() == nil {
				l.log.Warn("re-check of promotions failed", "err", err)
			}
			pe.observe(ctx, l.active, l.lastDue)
			if f := l.afterRecheck.Load(); f != nil {
				(*f)()
			}
			if now := l.cfg.Now(); now.Sub(lastSweep) >= sweepEvery*l.cfg.RecheckInterval {
				lastSweep = now
				if err := l.sweep(ctx); err != nil && ctx.Err() == nil {
					l.log.Warn("dead-letter sweep failed", "err", err)
				}
			}
			l.maybeRetire(ctx)
			l.forgetOld()
		}
	}
}

// serve answers one request, in the loop.
func (l *loop) serve(ctx context.Context, a ask) {
	switch a.kind {
	case askOpen, askPool:
		err := l.serveOpen(ctx, a)
		if a.done != nil {
			a.done <- err
		}
		if err == nil && a.kind == askPool {
			if _, err := l.wk.startOrWakePool(ctx, l.handles[a.id]); err != nil {
				l.log.Warn("cannot start confirmation pool; the next re-check retries", "promotion", a.id, "err", err)
			}
		}
	case askLost:
		if l.rb.busy(a.id) {
			return
		}
		l.log.Warn("Redis lost writes: claims wait for the promotion's rebuild",
			"promotion", a.id, "known_rank", l.fences.get(a.id))
		if p, ok := l.active[a.id]; ok {
			l.rb.startRebuild(p, reasonFenced, false)
			return
		}
		l.rb.startRebuildWith(a.id, func(ctx context.Context) (Promotion, error) { return load(ctx, l.st, a.id) }, reasonFenced, false)
	case askJournalLost:
		// A rebuild that ended since the journal asked resumed after the
		// loss it found: the next prune puts the claims back (or asks again).
		if !l.rb.endedAfter(a.id, a.asked) {
			l.rebuildForJournal(a.id)
		}
	case askRefresh:
		err := l.refresh(ctx, a.id)
		if err != nil && ctx.Err() == nil {
			l.log.Debug("cannot read a changed promotion; the next re-check does", "promotion", a.id, "err", err)
		}
		if a.done != nil {
			a.done <- err
		}
	}
}

// refresh reads promotion id's definition again, if the loop tracks it,
// and hands it to its handles and its entry in l.active.
func (l *loop) refresh(ctx context.Context, id string) error {
	if l.handles[id] == nil {
		return nil // not tracked: its handles are made from a fresh read
	}
	p, err := load(ctx, l.st, id)
	if err != nil {
		return err
	}
	if _, ok := l.active[id]; ok {
		l.active[id] = p
	}
	l.refreshHandles(p)
	return nil
}

// serveOpen opens the promotion of a, unless an open of it succeeded (or a
// lookup found none) since a was asked: then requests queued behind one
// open are answered by it.
func (l *loop) serveOpen(ctx context.Context, a ask) error {
	if at, ok := l.opened[a.id]; ok && at.After(a.asked) && !a.hasDef {
		return nil
	}
	if at, ok := l.missing[a.id]; ok && at.After(a.asked) {
		return ErrNotFound
	}
	if l.gone[a.id] {
		return errRetired
	}
	p := a.def
	if !a.hasDef {
		var err error
		if p, err = load(ctx, l.st, a.id); errors.Is(err, ErrNotFound) {
			l.remember(l.missing, a.id)
			return err
		} else if err != nil {
			return err
		}
	}
	if p.retired() {
		// Retired, not lost: its Redis state is never made again.
		if len(l.gone) >= maxRemembered {
			clear(l.gone)
		}
		l.gone[p.ID] = true
		return errRetired
	}
	if err := l.op.open(ctx, p); err != nil {
		return err
	}
	l.active[p.ID] = p
	l.track([]Promotion{p}, false)
	l.remember(l.opened, p.ID)
	delete(l.missing, p.ID)
	return nil
}

// rebuildForJournal starts the rebuild of promotion id, whose claims this
// instance answered Redis lost, unless one runs here already.
func (l *loop) rebuildForJournal(id string) {
	if l.rb.busy(id) {
		return
	}
	l.log.Warn("Redis lost writes: claims this instance answered are missing; claims wait for the rebuild, then they are put back",
		"promotion", id)
	if p, ok := l.active[id]; ok {
		l.rb.startRebuild(p, reasonJournal, false)
		return
	}
	l.rb.startRebuildWith(id, func(ctx context.Context) (Promotion, error) { return load(ctx, l.st, id) }, reasonJournal, false)
}

// sweep applies the outside steps of dead-letter transitions and revokes
// that were decided in the database but never recorded as applied.
func (l *loop) sweep(ctx context.Context) error {
	return errors.Join(l.dl.sweepDeadLetters(ctx), l.rv.sweepRevokes(ctx))
}

// maybeRetire runs a retirement pass if one is due (every sweepEvery
// re-checks).
func (l *loop) maybeRetire(ctx context.Context) {
	now := l.cfg.Now()
	if !l.lastRetire.IsZero() && now.Sub(l.lastRetire) < sweepEvery*l.cfg.RecheckInterval {
		return
	}
	since := now.Add(-l.cfg.Retention) // the first pass finishes what a crash left
	if !l.lastRetire.IsZero() {
		since = l.lastRetire.Add(-retireSkew)
	}
	if err := l.rt.pass(ctx, now, since, l.active); err != nil {
		if ctx.Err() == nil {
			l.log.Warn("retirement pass failed; the next re-check retries", "err", err)
		}
		return
	}
	l.lastRetire = now
}
