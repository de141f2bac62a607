package promotion

import (
	"context"
	"errors"
	"time"

	"github.com/dibsio/dibs/claim"
)

// recheck loads the undrained promotions, makes sure each has its Redis
// state, starts the pool of each one with work, and marks ended promotions
// with no work left drained. On the first pass every undrained promotion's
// pool is started, so entries left pending by a killed process are resumed.
// An idle promotion (see Config.IdleRecheckInterval) is left out until its
// next idle re-check is due, so an instance whose promotions are all idle
// sends Redis only its loss probes (probe.go) in between; a probe that
// finds Redis lost writes has every promotion re-checked at once.
func (l *loop) recheck(ctx context.Context, first bool) error {
	l.takeWakes()
	list, refresh, err := l.reload(ctx, first)
	if err != nil {
		return err
	}
	now := l.cfg.Now()
	var errs []error
	// Every promotion is looked at if Redis may have lost writes.
	all := first
	if l.pr.probeDue(l.idleAt) && l.pr.probeLoss(ctx) {
		all = true
	}
	list = l.due(ctx, list, refresh, all, now)
	l.withCodes(ctx, list)
	marks, err := l.checkFloors(ctx, list, refresh)
	if err != nil {
		errs = append(errs, err)
	}
	l.recordDue(list, marks)
	if err := l.repair(ctx, list, marks); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, l.settle(ctx, list, marks, first, now)...)
	return errors.Join(errs...)
}

// takeWakes clears the wakes that came before this re-check reads the
// database: the re-check sees what they told of. A wake that comes after
// the read stays set through the re-check (due never clears one), so the
// re-check cannot mark its promotion idle from the read that predates it,
// and the next re-check looks again.
func (l *loop) takeWakes() {
	for id, h := range l.handles {
		if h.quietUntil.CompareAndSwap(woken, 0) {
			delete(l.idleAt, id) // idle again only after a probe that follows
		}
	}
}

// reload reads the undrained promotions from the database into the loop's
// set, tracks and sizes them, and returns them with those to open (seen
// for the first time, or every one on the first re-check).
func (l *loop) reload(ctx context.Context, first bool) ([]Promotion, map[string]bool, error) {
	stored, err := l.st.ListUndrained(ctx)
	if err != nil {
		return nil, nil, err
	}
	list := make([]Promotion, len(stored))
	fresh := make(map[string]Promotion, len(list))
	for i, sp := range stored {
		list[i] = fromStore(sp)
		fresh[sp.ID] = list[i]
	}
	prev := l.active
	l.active = fresh
	l.track(list, true)
	l.sizes.resize(ctx, list, l.handles, first)
	// Redis is fast, the database is the truth: a promotion whose counters
	// fell behind the database is marked rebuilding and rebuilt before
	// anything else. Promotions seen for the first time are opened on the way.
	refresh := make(map[string]bool)
	for _, p := range list {
		if _, known := prev[p.ID]; first || !known {
			refresh[p.ID] = true
		}
	}
	return list, refresh, nil
}

// recordDue remembers the promotions this re-check looked at, with the
// marks it read of them (zero where it could not), for the promotion
// events.
func (l *loop) recordDue(list []Promotion, marks []claim.Mark) {
	l.lastDue = make(map[string]claim.Mark, len(list))
	for i, p := range list {
		if i < len(marks) {
			l.lastDue[p.ID] = marks[i]
		} else {
			l.lastDue[p.ID] = claim.Mark{}
		}
	}
}

// settle reads the backlog of every promotion in list, in one pipelined
// round trip, and settles each (settleOne); marks are what checkFloors
// read, nil if it could not.
func (l *loop) settle(ctx context.Context, list []Promotion, marks []claim.Mark, first bool, now time.Time) []error {
	var errs []error
	works, werrs := l.pools.groupWorks(ctx, list)
	segBusy, err := l.segmentWork(ctx, list, first)
	if err != nil {
		errs = append(errs, err)
	}
	for i, p := range list {
		if werrs[i] != nil {
			errs = append(errs, werrs[i])
			delete(l.idleAt, p.ID)
			continue
		}
		var mk *claim.Mark
		if marks != nil {
			mk = &marks[i]
		}
		if err := l.settleOne(ctx, p, works[i], mk, segBusy[p.ID], first, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// settleOne starts or wakes p's pool if its backlog work is not empty (or
// on the first re-check), drains p if it ended with no pool running, and
// marks it idle if it is calm: its marks mk (nil if not read) allow it,
// and nothing of it runs or waits here.
func (l *loop) settleOne(ctx context.Context, p Promotion, work groupState, mk *claim.Mark, segBusy, first bool, now time.Time) error {
	if l.cfg.OnBacklog != nil {
		l.cfg.OnBacklog(p.ID, work.pending+max(work.lag, 0))
	}
	if work.busy() || first {
		_, err := l.wk.startOrWakePool(ctx, l.handles[p.ID])
		delete(l.idleAt, p.ID)
		return err
	}
	running := l.reg.Running(p.ID) || segBusy
	calm := mk != nil && !running && l.journalEmpty(p.ID) && !l.rb.busy(p.ID) && canIdle(p, *mk)
	var err error
	if p.ended(now) && !running {
		if err = l.maybeDrain(ctx, p); err != nil {
			calm = false
		}
		if _, undrained := l.active[p.ID]; !undrained {
			return err
		}
	}
	if calm {
		l.markIdle(p, now)
	} else {
		delete(l.idleAt, p.ID)
	}
	return err
}

// due returns the promotions of list this re-check looks at: all of them
// with all, else all but the idle ones whose next idle re-check is not due
// yet and that a probe ran after they were found idle (probe.go). It
// clears the idle mark of those it returns; the re-check sets it again if
// they are still idle. An idle promotion left out is still checked
// against the database (one query, no Redis command): a database whose
// highest rank is below the rank Redis last showed confirmed (the
// database-older-than-Redis halt) makes it due now.
func (l *loop) due(ctx context.Context, list []Promotion, refresh map[string]bool, all bool, now time.Time) []Promotion {
	out := list[:0:0]
	var skipped []string
	for _, p := range list {
		h := l.handles[p.ID]
		if h != nil && !refresh[p.ID] && !all {
			// Half a tick early rather than a whole tick late.
			until := h.quietUntil.Load()
			at, idle := l.idleAt[p.ID]
			if until > 0 && idle && at < l.pr.seq && now.Add(l.cfg.RecheckInterval/2).UnixNano() < until {
				skipped = append(skipped, p.ID)
				continue
			}
			if until == woken {
				delete(l.idleAt, p.ID)
			}
		}
		if h != nil {
			clearQuiet(h)
		}
		out = append(out, p)
	}
	if len(skipped) == 0 {
		return out
	}
	floors, err := l.st.MaxRanks(ctx, skipped)
	if err != nil {
		l.log.Debug("cannot read the highest ranks of idle promotions; the next re-check retries", "err", err)
		return out
	}
	for _, id := range skipped {
		if floors[id] < l.confirmedSeen[id] {
			clearQuiet(l.handles[id])
			out = append(out, l.active[id])
		}
	}
	return out
}

// clearQuiet makes h's promotion ordinary for this re-check: it clears the
// idle mark, but not a wake that came since the re-check read the database
// (see takeWakes).
func clearQuiet(h *handle) {
	if u := h.quietUntil.Load(); u > 0 {
		h.quietUntil.CompareAndSwap(u, 0)
	}
}

// markIdle records that a re-check found p idle: it is looked at again
// after Config.IdleRecheckInterval, or when it ends if that is sooner (an
// ended one not yet drained: sooner still, backing off), unless a claim or
// a hint comes first.
func (l *loop) markIdle(p Promotion, now time.Time) {
	h := l.handles[p.ID]
	if h == nil {
		return
	}
	until := now.Add(l.cfg.IdleRecheckInterval)
	switch {
	case !p.ended(now) && p.EndsAt.Before(until):
		until = p.EndsAt
	case p.ended(now):
		// Ended and not drained yet (by Redis TIME, the claims'
		// clock, it may not have ended): looked at again after as long as
		// it has been ended here, at least a re-check interval.
		until = now.Add(min(l.cfg.IdleRecheckInterval, max(now.Sub(p.EndsAt), l.cfg.RecheckInterval)))
	}
	// Unless a claim or a hint came since due cleared the mark.
	if !h.quietUntil.CompareAndSwap(0, until.UnixNano()) {
		delete(l.idleAt, p.ID)
		return
	}
	if _, ok := l.idleAt[p.ID]; !ok {
		l.idleAt[p.ID] = l.pr.seq
	}
}

// journalEmpty reports whether every claim of promotion id this instance
// answered was seen confirmed.
func (l *loop) journalEmpty(id string) bool {
	h := l.handles[id]
	return h == nil || h.journaled.Load() == 0
}

// canIdle reports whether p, with marks mk, can be left idle: Redis holds
// it, not rebuilding or halted (those are watched every re-check), and it has
// no segments (their transfers are settled every re-check).
func canIdle(p Promotion, mk claim.Mark) bool {
	return mk.Exists && !mk.Rebuilding && mk.Halted == "" && !p.segmented()
}

// maybeDrain marks an ended promotion drained when the database accounts
// for every accepted claim. Whether it ended is decided by Redis, against
// Redis TIME — the clock the claim script's window uses — never by this
// instance's clock: the same step closes it in Redis, so no claim is
// accepted after it is found ended, and the rank counter it reads is final.
func (l *loop) maybeDrain(ctx context.Context, p Promotion) error {
	isEnded, seq, err := l.so.ended(ctx, p)
	if errors.Is(err, claim.ErrNotFound) {
		return nil // the next re-check opens it again
	}
	if err != nil || !isEnded {
		return err
	}
	c, err := l.st.Counts(ctx, p.ID)
	if err != nil {
		return err
	}
	if c.Issued+c.Failed+c.Voided < seq {
		return nil
	}
	if err := l.st.MarkDrained(ctx, p.ID, l.cfg.Now()); err != nil {
		return err
	}
	// A replay may have moved claims back into the pipeline, and a re-rank
	// may have taken a rank, since the counts were read: read both again,
	// and undo the drain if the database falls short (a replay that moves
	// its claims later undoes it itself).
	// A change may have moved the end later meanwhile (see Patch): a
	// promotion no longer ended is not drained either.
	ended2, seq2, err := l.so.ended(ctx, p)
	if err == nil {
		c, err = l.st.Counts(ctx, p.ID)
	}
	if err != nil || !ended2 || seq2 != seq || c.Issued+c.Failed+c.Voided < seq2 {
		if uerr := l.st.SetDrained(ctx, p.ID, false); uerr != nil {
			return errors.Join(err, uerr)
		}
		return err
	}
	delete(l.active, p.ID)
	l.untrack(p.ID)
	l.fences.forget(p.ID)
	if l.cfg.OnDrained != nil {
		l.cfg.OnDrained(p.ID)
	}
	l.log.Info("promotion drained", "promotion", p.ID, "issued", c.Issued, "failed", c.Failed)
	return nil
}

// segmentWork starts or wakes the pools of the segments 1..N-1 of the
// promotions in list whose streams have work (every one on the first
// re-check), settles their transfers in flight, and reports which
// promotions have a segment pool running or work in a segment.
func (l *loop) segmentWork(ctx context.Context, list []Promotion, first bool) (map[string]bool, error) {
	var segs []Promotion // one entry per segment 1..N-1, ID its tag
	var owner []string
	for _, p := range list {
		if !p.segmented() {
			continue
		}
		layout := l.handles[p.ID].segs
		if err := l.gate.SettleTransfers(ctx, layout); err != nil {
			l.log.Warn("cannot settle transfers of stock between segments; the next re-check retries", "promotion", p.ID, "err", err)
		}
		for _, tag := range layout.Tags()[1:] {
			segs = append(segs, Promotion{ID: tag})
			owner = append(owner, p.ID)
		}
	}
	busy := make(map[string]bool)
	works, werrs := l.pools.groupWorks(ctx, segs)
	var errs []error
	for i, s := range segs {
		if werrs[i] != nil {
			errs = append(errs, werrs[i])
			busy[owner[i]] = true
			continue
		}
		if works[i].busy() || first {
			busy[owner[i]] = true
			if _, err := l.wk.startOrWakePool(ctx, l.handles[s.ID]); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if l.reg.Running(s.ID) {
			busy[owner[i]] = true
		}
	}
	return busy, errors.Join(errs...)
}

// withCodes fills in the pool size of each promotion of list, from what
// the loop read before unless a change dropped it (forgetCached): a pool
// only grows, so a size read before is at most too low, which caps the
// gate lower than needed, never higher, and repair reads it afresh before
// it sets Redis.
func (l *loop) withCodes(ctx context.Context, list []Promotion) {
	for i := range list {
		p := &list[i]
		if h := l.handles[p.ID]; h != nil {
			if n := h.codes.Load(); n > 0 {
				p.codes = n - 1
				continue
			}
		}
		if err := poolCodes(ctx, l.st, p); err != nil {
			l.log.Warn("cannot read the promotion's code pool; its stock in Redis is left as it is", "promotion", p.ID, "err", err)
			continue
		}
		if h := l.handles[p.ID]; h != nil {
			h.codes.Store(p.codes + 1)
		}
	}
}
