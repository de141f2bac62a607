package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// Handling: a batch goes to the handler, and every entry of it is settled:
// acknowledged, dead-lettered, left pending, or retried after a pause.

// handle runs the handler on msgs and settles every entry: acknowledge,
// dead-letter, leave pending, or (transient) pause the pool and retry.
// Nothing is settled without a valid lease: if it was lost meanwhile, the
// entries stay pending for the process that holds the name now. Only handler
// failures of no kind move an entry towards the dead letters (counted in
// FailuresKey); how often Redis delivered it does not matter.
func (p *Pool) handle(c *consumer, msgs []Message) {
	ctx := context.WithValue(p.hardCtx, consumerKey{}, c.name)
	run, ok := p.settleSpent(ctx, c, msgs)
	if !ok {
		return
	}
	for round := 1; len(run) > 0; round++ {
		errs := callHandler(ctx, p.spec.Handler, p.cfg.HandlerTimeout, run)
		if !p.mayAck(c) {
			return
		}
		cb := p.callbackDeadline(ctx)
		var acks, retry, failed []Message
		var causes []error
		var transient error // the first transient failure, for the log
		for i, m := range run {
			var err error
			if errs != nil {
				err = errs[i]
			}
			if err == nil {
				acks = append(acks, m)
				continue
			}
			kind := failureKind(err)
			p.hookFailure(kind)
			switch kind {
			case FailureMalformed:
				p.deadLetter(ctx, cb, m, m.Failures+1, "malformed: "+err.Error(), true)
			case FailurePermanent:
				p.deadLetter(ctx, cb, m, m.Failures+1, "permanent: "+err.Error(), true)
			case FailureTransient:
				retry = append(retry, m)
				if transient == nil {
					transient = err
				}
			default:
				failed = append(failed, m)
				causes = append(causes, err)
			}
		}
		p.settleFailed(ctx, cb, failed, causes)
		cb.release()
		p.ack(ctx, acks)
		if len(retry) == 0 {
			return
		}
		// A dependency is down: pause the whole pool, then retry the same
		// entries in memory so the attempt does not count as a delivery.
		d := backoff(round, 100*time.Millisecond, max(p.cfg.ReclaimMinIdle/4, time.Millisecond))
		p.log.Warn("stream handler reported a transient failure; pausing", "entries", len(retry), "pause", d, "err", transient)
		p.pause(d)
		if !p.sleep(c, d) || !p.mayAck(c) {
			return // stopping: the entries stay pending
		}
		if err := p.touch(ctx, c.name, retry); err != nil {
			p.log.Warn("stream could not keep entries claimed; they stay pending", "err", err)
			return
		}
		run = retry
	}
}

// ack acknowledges handled messages through Spec.Ack or a plain XACK, and
// deletes the failure counts of those that had any.
func (p *Pool) ack(ctx context.Context, msgs []Message) {
	if len(msgs) == 0 {
		return
	}
	var counted []string
	for _, m := range msgs {
		if m.Failures > 0 {
			counted = append(counted, m.ID)
		}
	}
	var err error
	if p.spec.Ack != nil {
		if err = p.spec.Ack(ctx, msgs); err == nil {
			if err := p.forgetFailures(ctx, counted); err != nil {
				p.log.Warn("stream failure counts not deleted; the reclaim pass will", "err", err)
			}
		}
	} else {
		err = p.xack(ctx, msgs, counted)
	}
	if err != nil {
		p.hookFailure(FailureAck)
		p.log.Warn("stream ack failed; entries stay pending", "entries", len(msgs), "err", err)
		return
	}
	if h := p.cfg.Hooks.Ack; h != nil {
		h(p.spec.Stream, len(msgs))
	}
}

// xack acknowledges msgs with plain XACKs and deletes the failure counts of
// counted in the same round trip: one XACK and one HDEL per callSlice ids.
func (p *Pool) xack(ctx context.Context, msgs []Message, counted []string) error {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	cl := p.client
	acks := chunks(ids, callSlice)
	cmds := make(rueidis.Commands, 0, len(acks)+len(counted)/callSlice+1)
	for _, part := range acks {
		cmds = append(cmds, cl.B().Xack().Key(p.spec.Stream).Group(p.spec.Group).Id(part...).Build())
	}
	for _, part := range chunks(counted, callSlice) {
		cmds = append(cmds, cl.B().Hdel().Key(p.failuresKey).Field(part...).Build())
	}
	res := cl.DoMulti(ctx, cmds...)
	for _, r := range res[:len(acks)] {
		if err := r.Error(); err != nil {
			return fmt.Errorf("stream: XACK %s: %w", p.spec.Stream, err)
		}
	}
	for _, r := range res[len(acks):] {
		if err := r.Error(); err != nil {
			p.log.Warn("stream failure counts not deleted; the reclaim pass will", "err", err)
			break
		}
	}
	return nil
}

// mayAck reports whether c may settle entries now: it holds its lease.
func (p *Pool) mayAck(c *consumer) bool {
	_, ok := p.holdLease(c, true)
	return ok
}

// settleSpent dead-letters, without calling the handler, the entries that
// must not run again: deleted from the stream while pending, or whose last
// counted failure reached MaxDeliveries but was not dead-lettered then (the
// callback or Redis failed). It returns the entries left to run, and false
// if c lost its lease meanwhile.
func (p *Pool) settleSpent(ctx context.Context, c *consumer, msgs []Message) ([]Message, bool) {
	run := make([]Message, 0, len(msgs))
	cb := p.callbackDeadline(ctx)
	defer cb.release()
	for _, m := range msgs {
		var reason string
		switch {
		case m.Fields == nil:
			reason = reasonDeleted
		case m.Failures >= p.cfg.MaxDeliveries:
			reason = fmt.Sprintf("max deliveries (%d) reached: %d handler failures", p.cfg.MaxDeliveries, m.Failures)
		default:
			run = append(run, m)
			continue
		}
		if !p.mayAck(c) {
			return nil, false
		}
		p.deadLetter(ctx, cb, m, m.Failures, reason, true)
	}
	return run, true
}
