package promotion

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// Retirement. A promotion that ended and drained keeps its Redis state for
// Config.Retention (reads, idempotent retries and user lookups are served
// as before), then the loop retires it:
//
//  1. the database first: RetirePromotion sets retired_at, only while the
//     promotion is drained (a replay that moved claims back wins), and only
//     once its consumer group has nothing pending or undelivered and no pool
//     of it runs here;
//  2. then Redis: one pipelined round trip trims the dead-letter stream and
//     deletes the claim keys, the idempotency records, the work stream with
//     its group and failure counts, and the waiting room's keys.
//
// Every step is idempotent, so two instances may retire one promotion at
// once, and one that died between the steps leaves the Redis step to the
// next pass of any instance: a pass lists the promotions retired since the
// previous pass began (less retireSkew for clocks) as well as the ones due.
//
// Retirement is not loss. Nothing makes a retired promotion's Redis state
// again: opening it (for a claim, a read, a close) answers from the
// database — ErrEnded for claims and grants, the stored counts for reads —
// and a rebuild, a replay or a void of it is refused. The loss detection
// (fence.go, rebuild.go) only looks at undrained promotions, and a retired
// one is drained for good: the store refuses to mark it undrained.

const (
	// retireBatch bounds the promotions one retirement pass takes.
	retireBatch = 100
	// retireSkew is how far the clocks of two instances may differ: a pass
	// looks again at promotions retired this long before the previous pass
	// began.
	retireSkew = time.Minute
)

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
	if err := l.retirePass(ctx, now, since); err != nil {
		if ctx.Err() == nil {
			l.log.Warn("retirement pass failed; the next re-check retries", "err", err)
		}
		return
	}
	l.lastRetire = now
}

// retirePass retires the promotions drained at least Retention before now,
// and finishes those retired since since.
func (l *loop) retirePass(ctx context.Context, now, since time.Time) error {
	ps, err := l.st.ListRetirable(ctx, now.Add(-l.cfg.Retention), since, retireBatch)
	if err != nil {
		return err
	}
	var errs []error
	for _, sp := range ps {
		if err := l.retire(ctx, fromStore(sp), now); err != nil {
			errs = append(errs, fmt.Errorf("retire %s: %w", sp.ID, err))
		}
	}
	return errors.Join(errs...)
}

// retire retires p (or finishes retiring it): the database, then Redis.
func (l *loop) retire(ctx context.Context, p Promotion, now time.Time) error {
	if !p.retired() {
		if _, watched := l.active[p.ID]; watched || l.reg.Running(p.ID) {
			return nil // claims came back (a replay): not drained any more
		}
		work, err := l.m.rt.groupWork(ctx, p.ID)
		if err != nil {
			return err
		}
		if work.busy() {
			l.log.Warn("drained promotion still has claims in its stream; not retiring it yet",
				"promotion", p.ID, "pending", work.pending, "lag", work.lag)
			return nil
		}
		sp, err := l.st.RetirePromotion(ctx, p.ID, now)
		if errors.Is(err, store.ErrNotRetirable) {
			return nil
		}
		if err != nil {
			return err
		}
		p = fromStore(sp)
	}
	if err := l.m.rt.clearRedis(ctx, p); err != nil {
		return err
	}
	l.m.fences.forget(p.ID)
	l.log.Info("promotion retired: its Redis state is deleted, the database answers for it",
		"promotion", p.ID, "retired_at", p.RetiredAt)
	return nil
}

// retirement is what the loop's retirement pass and the requests that
// read a retired promotion share: its stream's backlog, its Redis keys,
// its view from the database.
type retirement struct{ m *Manager }

// groupWork reads the issuers group's backlog of promotion id; a stream or
// group that does not exist has none.
func (rt *retirement) groupWork(ctx context.Context, id string) (groupState, error) {
	res := rt.m.client.Do(ctx, rt.m.client.B().XinfoGroups().Key(rt.m.gate.Keys(id).Stream()).Build())
	if err := res.Error(); err != nil && strings.Contains(err.Error(), "no such key") {
		return groupState{}, nil
	}
	work, err := parseGroupWork(id, res)
	if err != nil && res.Error() == nil {
		return groupState{}, nil // no issuers group
	}
	return work, err
}

// clearRedis deletes a retired promotion's Redis state in one pipelined
// round trip: the dead-letter stream trimmed (the database holds every dead
// letter) and every key deleted. Idempotent.
func (rt *retirement) clearRedis(ctx context.Context, p Promotion) error {
	k := rt.m.gate.Keys(p.ID)
	b := rt.m.client.B()
	keys := append(k.State(), stream.FailuresKey(k.Stream(), claim.Group))
	if p.segmented() {
		keys = append(keys, rt.m.so.segmentKeys(p)...)
	}
	if rooms := rt.m.cfg.Rooms; rooms != nil {
		keys = append(keys, rooms.Keys(p.ID).All()...)
	}
	cmds := rueidis.Commands{
		b.Xtrim().Key(k.DeadLetters()).Maxlen().Threshold("0").Build(),
	}
	// One DEL per key: in a Cluster, keys of one hash tag share a slot, but
	// a DEL of many keys is one command per node all the same.
	for _, key := range keys {
		cmds = append(cmds, b.Del().Key(key).Build())
	}
	var errs []error
	for _, res := range rt.m.client.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			errs = append(errs, err)
		}
	}
	if rooms := rt.m.cfg.Rooms; rooms != nil && len(errs) == 0 {
		errs = append(errs, rooms.Unregister(ctx, p.ID))
	}
	return errors.Join(errs...)
}

// retiredView is the view of a retired promotion, from the database alone:
// its state as it was when it drained (ended), its counts from the rows.
func (rt *retirement) retiredView(ctx context.Context, p Promotion) (View, error) {
	c, err := rt.m.st.Counts(ctx, p.ID)
	if err != nil {
		return View{}, err
	}
	v := View{Promotion: p, State: StateEnded}
	v.Counts.Issued, v.Counts.Failed = c.Issued, c.Failed
	v.Counts.Accepted = c.Issued + c.Failed
	if p.Mode != ModeGrant {
		r := max(p.Stock-v.Counts.Accepted, 0)
		v.Counts.Remaining = &r
	}
	return v, nil
}

// retiredClaims is a user's claims in a retired promotion, from the
// database: the issued ones.
func (rt *retirement) retiredClaims(ctx context.Context, id, userID string) ([]UserClaim, error) {
	issued, err := rt.m.st.ListIssued(ctx, id, userID)
	if err != nil {
		return nil, domainErr(err)
	}
	out := make([]UserClaim, len(issued))
	for i, is := range issued {
		out[i] = UserClaim{ClaimID: is.ClaimID, Rank: is.Rank, Status: StatusIssued, IssuedAt: is.IssuedAt, Grant: is.Grant}
	}
	return out, nil
}

// errRetired answers a claim, grant or open of a retired promotion.
var errRetired = fmt.Errorf("%w: the promotion is retired", ErrEnded)

// notRetired loads promotion id and fails with ErrEnded if it is retired:
// for the admin steps that would write its Redis state (replay, void).
func (rt *retirement) notRetired(ctx context.Context, id string) error {
	p, err := rt.m.load(ctx, id)
	if err != nil {
		return err
	}
	if p.retired() {
		return errRetired
	}
	return nil
}
