package stream

import "context"

// Reclaiming: entries left pending too long by a consumer that died (or
// whose handler failed) are taken over with XAUTOCLAIM and handled again;
// the same pass deletes stale failure counts, trims acknowledged entries and
// samples the lag.

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
func (p *Pool) reclaim(c *consumer) {
	ctx := p.hardCtx
	cursor := "0-0"
	for range 16 {
		if _, ok := p.holdLease(c, false); !ok {
			return
		}
		msgs, deleted, next, err := p.xautoclaim(ctx, c.name, cursor)
		if err != nil {
			if !p.halted() {
				p.hookFailure(FailureRedis)
				p.log.Warn("stream reclaim failed", "err", err)
			}
			break
		}
		if len(deleted) > 0 {
			p.deadLetterDeleted(ctx, deleted)
		}
		if len(msgs) > 0 {
			if err := p.deliveryCounts(ctx, msgs); err != nil {
				p.log.Warn("stream delivery counts unavailable", "err", err)
				break
			}
			p.report(c, report{kind: reportSeen})
			p.handle(c, msgs)
		}
		if next == "0-0" || next == "" || p.quitting(c) {
			break
		}
		cursor = next
	}
	if p.quitting(c) {
		return
	}
	// The housekeeping below is cut short by Stop (readCtx): a Stop without
	// a deadline must not wait for it on an unreachable Redis.
	p.housekeep(p.readCtx)
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
		if err := trimScript.Exec(ctx, p.client, []string{p.spec.Stream}, nil).Error(); err != nil {
			warn("stream trim failed", err)
		}
	}
	if h := p.cfg.Hooks.Lag; h != nil {
		if gi, err := readGroup(ctx, p.client, p.spec.Stream, p.spec.Group); err == nil {
			h(p.spec.Stream, gi.lag, gi.pending)
		}
	}
}
