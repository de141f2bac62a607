package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Dead-lettering: giving up on an entry that is malformed, failed
// permanently, or failed MaxDeliveries times, or that Redis dropped from the
// pending list because it was deleted from the stream.

// reasonDeleted is the dead-letter reason of an entry deleted from the
// stream while it was pending.
const reasonDeleted = "entry deleted from the stream while pending"

// settleFailed counts one failure for each entry whose handler failed with
// an error of no kind (or panicked), and dead-letters those whose count
// reached MaxDeliveries; the others stay pending, to be retried after
// ReclaimMinIdle. Entries whose failure could not be counted stay pending.
func (p *Pool) settleFailed(ctx context.Context, cb *callbackDeadline, msgs []Message, causes []error) {
	if len(msgs) == 0 {
		return
	}
	counts, err := p.countFailures(ctx, msgs)
	if err != nil {
		p.hookFailure(FailureRedis)
		p.log.Warn("stream could not count handler failures; entries stay pending", "entries", len(msgs), "err", err)
		return
	}
	for i, m := range msgs {
		if counts[i] >= p.cfg.MaxDeliveries {
			p.deadLetter(ctx, cb, m, counts[i], fmt.Sprintf("max deliveries (%d) reached: %v", p.cfg.MaxDeliveries, causes[i]), true)
			continue
		}
		p.log.Warn("stream handler failed; entry stays pending", "id", m.ID, "failures", counts[i], "deliveries", m.Deliveries, "err", causes[i])
	}
}

// deadLetterDeleted dead-letters entries that Redis dropped from the PEL
// because they were deleted from the stream while pending.
func (p *Pool) deadLetterDeleted(ctx context.Context, ids []string) {
	counts, err := p.failureCounts(ctx, ids)
	if err != nil {
		p.log.Warn("stream failure counts unavailable", "err", err)
		counts = make([]int64, len(ids))
	}
	cb := p.callbackDeadline(ctx)
	defer cb.release()
	for i, id := range ids {
		p.deadLetter(ctx, cb, Message{ID: id, Failures: counts[i]}, counts[i], reasonDeleted, false)
	}
}

// callbackDeadline bounds the dead-letter callbacks of one step: made on
// first use, they share one deadline of HandlerTimeout. It belongs to the
// goroutine settling that step.
type callbackDeadline struct {
	parent  context.Context
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
}

func (p *Pool) callbackDeadline(parent context.Context) *callbackDeadline {
	return &callbackDeadline{parent: parent, timeout: p.cfg.HandlerTimeout}
}

// context returns the callbacks' context, starting the deadline on the
// first call.
func (d *callbackDeadline) context() context.Context {
	if d.ctx == nil {
		d.ctx, d.cancel = context.WithTimeout(d.parent, d.timeout)
	}
	return d.ctx
}

// release frees the deadline's timer. Safe to call twice.
func (d *callbackDeadline) release() {
	if d.cancel != nil {
		d.cancel()
	}
}

// deadLetter gives up on m: the callback, then the dead-letter stream, the
// XACK and the deletion of its failure count in one round trip. failures is
// the reported DeadLetter.Deliveries. With pending false the entry is no
// longer in the PEL (Redis dropped it), so there is nothing to acknowledge
// and a callback error cannot keep it. The callback runs under cb's
// deadline.
func (p *Pool) deadLetter(ctx context.Context, cb *callbackDeadline, m Message, failures int64, reason string, pending bool) bool {
	d := DeadLetter{Message: m, Deliveries: failures, Reason: reason, At: p.cfg.Clock.Now()}
	reported := false // the callback took the dead letter, and logs it
	if p.spec.OnDeadLetter != nil {
		err := p.spec.OnDeadLetter(cb.context(), d)
		reported = err == nil
		if errors.Is(err, ErrResolved) {
			p.log.Info("stream entry found done instead of dead-lettered", "id", m.ID, "failures", failures)
			if err := p.forgetFailures(ctx, []string{m.ID}); err != nil {
				p.log.Warn("stream failure count not deleted; the reclaim pass will", "id", m.ID, "err", err)
			}
			return true
		} else if err != nil {
			p.hookFailure(FailureDeadLetter)
			p.log.Warn("stream dead-letter callback failed", "id", m.ID, "err", err)
			if pending {
				return false
			}
		}
	}
	cl := p.client
	fv := cl.B().Xadd().Key(p.spec.DeadLetterStream).Id("*").FieldValue()
	if n := p.cfg.DeadLetterMaxLen; n > 0 {
		fv = cl.B().Xadd().Key(p.spec.DeadLetterStream).Maxlen().Almost().Threshold(strconv.FormatInt(n, 10)).
			Id("*").FieldValue()
	}
	fv = fv.FieldValue(DeadLetterFieldID, m.ID).
		FieldValue(DeadLetterFieldReason, reason).
		FieldValue(DeadLetterFieldDeliveries, strconv.FormatInt(failures, 10)).
		FieldValue(DeadLetterFieldRedisDeliveries, strconv.FormatInt(m.Deliveries, 10)).
		FieldValue(DeadLetterFieldAt, unixMS(d.At))
	keys := make([]string, 0, len(m.Fields))
	for k := range m.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fv = fv.FieldValue(k, m.Fields[k])
	}
	cmds := rueidis.Commands{fv.Build()}
	if pending {
		cmds = append(cmds, cl.B().Xack().Key(p.spec.Stream).Group(p.spec.Group).Id(m.ID).Build())
	}
	cmds = append(cmds, cl.B().Hdel().Key(p.failuresKey).Field(m.ID).Build())
	res := cl.DoMulti(ctx, cmds...)
	for _, r := range res[:len(res)-1] {
		if err := r.Error(); err != nil {
			p.hookFailure(FailureDeadLetter)
			p.log.Warn("stream dead letter failed; entry stays pending", "id", m.ID, "err", err)
			return false
		}
	}
	if err := res[len(res)-1].Error(); err != nil {
		p.log.Warn("stream failure count not deleted; the reclaim pass will", "id", m.ID, "err", err)
	}
	// Each dead letter is logged once, at Warn: by the OnDeadLetter
	// callback that took it, which knows what the entry stood for, or else
	// here.
	level := slog.LevelWarn
	if reported {
		level = slog.LevelDebug
	}
	p.log.Log(ctx, level, "stream entry dead-lettered", "id", m.ID, "failures", failures, "deliveries", m.Deliveries, "reason", reason)
	if h := p.cfg.Hooks.DeadLetter; h != nil {
		h(p.spec.Stream, reason)
	}
	return true
}
