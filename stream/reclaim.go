package stream

import (
	"context"
	"strconv"
)

// Reclaiming: entries left pending too long by a consumer that died (or
// whose handler failed) are taken over and handled again; the same pass
// deletes stale failure counts, trims acknowledged entries and samples the
// lag.
//
// A pass scans the group's pending list in slices (reclaimScript): each
// looks at up to callSlice pending entries, only among those old enough to
// be idle (stream ids are the time an entry was added, so an entry added
// less than ReclaimMinIdle ago cannot have been idle that long), and takes
// over the idle ones, up to reclaimTake. A cursor carries the scan from slice to slice and,
// when a pass ends before the scan does, on to the next pass; a scan that
// reaches the entries too young to be idle is done, and the next one
// starts over at the oldest pending entry.

// maybeReclaim runs the reclaim pass on consumer c if it is due and no other
// consumer of the pool took it.
func (p *Pool) maybeReclaim(c *consumer) {
	now := p.cfg.Clock.Now().UnixNano()
	next := p.nextReclaim.Load()
	if now < next || !p.nextReclaim.CompareAndSwap(next, now+int64(p.cfg.ReclaimInterval)) {
		return
	}
	p.reclaim(c)
}

// reclaim takes over entries pending longer than ReclaimMinIdle (their
// consumer died, or their handler failed) and hands them to the handler with
// their delivery counts; then trims acknowledged entries and samples lag.
// One pass runs at a time in a pool: a pass still handling what it took
// over when the next one is due makes that one skip.
func (p *Pool) reclaim(c *consumer) {
	if !p.reclaimMu.TryLock() {
		return
	}
	defer p.reclaimMu.Unlock()
	if !p.reclaimScan(c) || p.quitting(c) {
		return
	}
	// The housekeeping below is cut short by Stop (readCtx): a Stop without
	// a deadline must not wait for it on an unreachable Redis.
	p.housekeep(p.readCtx)
}

// reclaimScan runs up to reclaimSlices slices of the scan from the pool's
// cursor and hands what they take over to the handler. It reports false if
// c lost its lease. The caller holds reclaimMu.
func (p *Pool) reclaimScan(c *consumer) bool {
	ctx := p.hardCtx
	count, take := callSlice, min(p.cfg.BatchSize, reclaimTake)
	if p.reclaimFrom == "" {
		p.reclaimFrom = reclaimStart
	}
	for range reclaimSlices {
		if _, ok := p.holdLease(c, false); !ok {
			return false
		}
		s, err := p.reclaimSlice(ctx, c.name, p.reclaimFrom, count, take)
		if err != nil {
			if !p.halted() {
				p.hookFailure(FailureRedis)
				p.log.Warn("stream reclaim failed", "err", err)
			}
			return true
		}
		next, done := advance(s.last, s.scanned, count, len(s.msgs)+len(s.deleted), take)
		p.reclaimFrom = next
		if len(s.deleted) > 0 {
			p.deadLetterDeleted(ctx, s.deleted)
		}
		if len(s.msgs) > 0 {
			if !p.reclaimedFailures(ctx, s.msgs) {
				// Taken over but not handled: they stay pending in c's
				// list, and a later pass takes them over again.
				return true
			}
			p.report(c, report{kind: reportSeen})
			p.handle(c, s.msgs)
		}
		if done || p.quitting(c) {
			return true
		}
	}
	return true
}

// reclaimedFailures fills in the counted failures of entries taken over;
// false if they could not be read.
func (p *Pool) reclaimedFailures(ctx context.Context, msgs []Message) bool {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	counts, err := p.failureCounts(ctx, ids)
	if err != nil {
		p.log.Warn("stream failure counts unavailable", "err", err)
		return false
	}
	for i := range msgs {
		msgs[i].Failures = counts[i]
	}
	return true
}

// housekeep deletes stale failure counts, trims acknowledged entries and
// samples the lag; failures are logged unless the pool is stopping.
func (p *Pool) housekeep(ctx context.Context) {
	warn := func(msg string, err error) {
		if ctx.Err() == nil {
			p.log.Warn(msg, "err", err)
		}
	}
	if n, err := p.sweepFailures(ctx); err != nil {
		warn("stream failure-count sweep failed", err)
	} else if n > 0 {
		p.log.Debug("stream failure counts of finished entries deleted", "counts", n)
	}
	if p.cfg.TrimAcked {
		if err := p.trim(ctx); err != nil {
			warn("stream trim failed", err)
		}
	}
	if h := p.cfg.Hooks.Lag; h != nil {
		if gi, err := readGroup(ctx, p.client, p.spec.Stream, p.spec.Group); err == nil {
			h(p.spec.Stream, gi.lag, gi.pending)
		}
	}
}

// trim trims acknowledged entries, at most trimSlice per call and
// trimSlices calls per pass, until a call trims nothing.
func (p *Pool) trim(ctx context.Context) error {
	limit := []string{strconv.Itoa(trimSlice)}
	for range trimSlices {
		n, err := trimScript.Exec(ctx, p.client, []string{p.spec.Stream}, limit).AsInt64()
		if err != nil || n == 0 {
			return err
		}
	}
	return nil
}
