package promotion

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

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
	stored, err := l.st.ListUndrained(ctx)
	if err != nil {
		return err
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
	l.resize(ctx, list, first)

	now := l.cfg.Now()
	var errs []error
	// Redis is fast, the database is the truth: a promotion whose counters
	// fell behind the database is paused and rebuilt before anything else.
	// Promotions seen for the first time are opened on the way.
	refresh := make(map[string]bool)
	for _, p := range list {
		if _, known := prev[p.ID]; first || !known {
			refresh[p.ID] = true
		}
	}
	// Every promotion is looked at if Redis may have lost writes.
	all := first
	if l.probeDue() && l.probeLoss(ctx) {
		all = true
	}
	list = l.due(ctx, list, refresh, all, now)
	l.withCodes(ctx, list)
	marks, err := l.checkFloors(ctx, list, refresh)
	if err != nil {
		errs = append(errs, err)
	}
	l.lastDue = make(map[string]claim.Mark, len(list))
	for i, p := range list {
		if i < len(marks) {
			l.lastDue[p.ID] = marks[i]
		} else {
			l.lastDue[p.ID] = claim.Mark{}
		}
	}
	if err := l.repair(ctx, list, marks); err != nil {
		errs = append(errs, err)
	}
	// One pipelined round trip reads every promotion's backlog.
	works, werrs := l.m.groupWorks(ctx, list)
	segBusy, err := l.segmentWork(ctx, list, first)
	if err != nil {
		errs = append(errs, err)
	}
	for i, p := range list {
		work, err := works[i], werrs[i]
		if err != nil {
			errs = append(errs, err)
			delete(l.idleAt, p.ID)
			continue
		}
		if l.cfg.OnBacklog != nil {
			l.cfg.OnBacklog(p.ID, work.pending+max(work.lag, 0))
		}
		if work.busy() || first {
			if _, err := l.m.wk.startOrWakePool(ctx, l.handles[p.ID]); err != nil {
				errs = append(errs, err)
			}
			delete(l.idleAt, p.ID)
			continue
		}
		running := l.reg.Running(p.ID) || segBusy[p.ID]
		calm := marks != nil && !running && l.journalEmpty(p.ID) && !l.m.rb.busy(p.ID) && canIdle(p, marks[i])
		if p.ended(now) && !running {
			if err := l.maybeDrain(ctx, p); err != nil {
				errs = append(errs, err)
				calm = false
			}
			if _, undrained := l.active[p.ID]; !undrained {
				continue
			}
		}
		if calm {
			l.markIdle(p, now)
		} else {
			delete(l.idleAt, p.ID)
		}
	}
	return errors.Join(errs...)
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
			h.quietUntil.Store(0)
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
			l.handles[id].quietUntil.Store(0)
			out = append(out, l.active[id])
		}
	}
	return out
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
// it, not paused or halted (those are watched every re-check), and it has
// no segments (their transfers are settled every re-check).
func canIdle(p Promotion, mk claim.Mark) bool {
	return mk.Exists && !mk.Rebuilding && mk.Halted == "" && !p.segmented()
}

// groupState is the consumer group's backlog.
type groupState struct {
	pending int64
	lag     int64 // -1 when Redis cannot tell
}

func (g groupState) busy() bool { return g.pending > 0 || g.lag != 0 }

// groupWorks reads the issuers group's pending count and lag of every
// promotion in list, in one pipelined round trip (rueidis sends each command
// to its promotion's Cluster node).
func (m *Manager) groupWorks(ctx context.Context, list []Promotion) ([]groupState, []error) {
	works := make([]groupState, len(list))
	errs := make([]error, len(list))
	if len(list) == 0 {
		return works, errs
	}
	cmds := make(rueidis.Commands, len(list))
	for i, p := range list {
		cmds[i] = m.client.B().XinfoGroups().Key(m.gate.Keys(p.ID).Stream()).Build()
	}
	for i, res := range m.client.DoMulti(ctx, cmds...) {
		works[i], errs[i] = parseGroupWork(list[i].ID, res)
	}
	return works, errs
}

// parseGroupWork reads the issuers group out of an XINFO GROUPS reply.
func parseGroupWork(id string, res rueidis.RedisResult) (groupState, error) {
	groups, err := res.ToArray()
	if err != nil {
		return groupState{}, fmt.Errorf("group state of %s: %w", id, err)
	}
	for _, g := range groups {
		fields, err := g.AsMap()
		if err != nil {
			continue
		}
		nameMsg := fields["name"]
		if name, _ := nameMsg.ToString(); name != claim.Group {
			continue
		}
		st := groupState{lag: -1}
		if v, ok := fields["pending"]; ok {
			st.pending, _ = v.AsInt64()
		}
		if v, ok := fields["lag"]; ok && !v.IsNil() {
			if n, err := v.AsInt64(); err == nil {
				st.lag = n
			}
		}
		return st, nil
	}
	return groupState{}, fmt.Errorf("group state of %s: no %s group", id, claim.Group)
}

// maybeDrain marks an ended promotion drained when the database accounts
// for every accepted claim. Whether it ended is decided by Redis, against
// Redis TIME — the clock the claim script's window uses — never by this
// instance's clock: the same step closes it in Redis, so no claim is
// accepted after it is found ended, and the rank counter it reads is final.
func (l *loop) maybeDrain(ctx context.Context, p Promotion) error {
	isEnded, seq, err := l.m.so.ended(ctx, p)
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
	ended2, seq2, err := l.m.so.ended(ctx, p)
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
	l.m.fences.forget(p.ID)
	if l.cfg.OnDrained != nil {
		l.cfg.OnDrained(p.ID)
	}
	l.log.Info("promotion drained", "promotion", p.ID, "issued", c.Issued, "failed", c.Failed)
	return nil
}
