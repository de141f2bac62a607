package promotion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
	"github.com/dibsio/dibs/waitroom"
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

// retirement retires drained promotions past their retention, in the
// loop's retirement pass (maybeRetire): the database, then their Redis
// state.
type retirement struct {
	client rueidis.Client
	gate   *claim.Gate
	st     store.Store
	reg    *stream.Registry
	pools  *streamPools
	so     *segmentOps
	rooms  *waitroom.Rooms // nil without
	fences *fences
	log    *slog.Logger
	// retention is Config.Retention.
	retention time.Duration
}

// pass retires the promotions drained at least Retention before now, and
// finishes those retired since since. active is the loop's set of
// undrained promotions: pass runs in the loop's goroutine.
func (rt *retirement) pass(ctx context.Context, now, since time.Time, active map[string]Promotion) error {
	ps, err := rt.st.ListRetirable(ctx, now.Add(-rt.retention), since, retireBatch)
	if err != nil {
		return err
	}
	var errs []error
	for _, sp := range ps {
		if err := rt.retire(ctx, fromStore(sp), now, active); err != nil {
			errs = append(errs, fmt.Errorf("retire %s: %w", sp.ID, err))
		}
	}
	return errors.Join(errs...)
}

// retire retires p (or finishes retiring it): the database, then Redis.
func (rt *retirement) retire(ctx context.Context, p Promotion, now time.Time, active map[string]Promotion) error {
	if !p.retired() {
		if _, watched := active[p.ID]; watched || rt.reg.Running(p.ID) {
			return nil // claims came back (a replay): not drained any more
		}
		work, err := rt.pools.groupWork(ctx, p.ID)
		if err != nil {
			return err
		}
		if work.busy() {
			rt.log.Warn("drained promotion still has claims in its stream; not retiring it yet",
				"promotion", p.ID, "pending", work.pending, "lag", work.lag)
			return nil
		}
		sp, err := rt.st.RetirePromotion(ctx, p.ID, now)
		if errors.Is(err, store.ErrNotRetirable) {
			return nil
		}
		if err != nil {
			return err
		}
		p = fromStore(sp)
	}
	if err := rt.clearRedis(ctx, p); err != nil {
		return err
	}
	rt.fences.forget(p.ID)
	rt.log.Info("promotion retired: its Redis state is deleted, the database answers for it",
		"promotion", p.ID, "retired_at", p.RetiredAt)
	return nil
}

// clearRedis deletes a retired promotion's Redis state in one pipelined
// round trip: the dead-letter stream trimmed (the database holds every dead
// letter) and every key deleted. Idempotent.
func (rt *retirement) clearRedis(ctx context.Context, p Promotion) error {
	k := rt.gate.Keys(p.ID)
	b := rt.client.B()
	keys := append(k.State(), stream.FailuresKey(k.Stream(), claim.Group))
	if p.segmented() {
		keys = append(keys, rt.so.segmentKeys(p)...)
	}
	if rt.rooms != nil {
		keys = append(keys, rt.rooms.Keys(p.ID).All()...)
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
	for _, res := range rt.client.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			errs = append(errs, err)
		}
	}
	if rt.rooms != nil && len(errs) == 0 {
		errs = append(errs, rt.rooms.Unregister(ctx, p.ID))
	}
	return errors.Join(errs...)
}
