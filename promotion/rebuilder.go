package promotion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/startstop"
	"github.com/dibsio/dibs/store"
)

// maxEnded bounds the rebuilder's record of when each promotion's last
// rebuild ended.
const maxEnded = 4096

// releaseTimeout bounds giving up a hold after a rebuild failed.
const releaseTimeout = 2 * time.Second

// rebuilder runs a Manager's background rebuilds: at most one per promotion
// in this process. Once New has handed it what it uses, the first rebuild
// starts it, stop ends it (before any rebuild too), and a stopped rebuilder begins
// none. Its lifecycle is a startstop.Base whose loop, the keeper, waits for
// stop, then cancels the rebuilds and waits for them.
type rebuilder struct {
	gate     *claim.Gate
	st       store.Store
	log      *slog.Logger
	fences   *fences
	wk       *waker
	now      func() time.Time // Config.Now
	instance string           // Config.Instance, the holder of this process's rebuilds
	// onRebuild and onHalted are Config.OnRebuild and Config.OnHalted.
	onRebuild func(RebuildReport)
	onHalted  func(promotionID string, halted bool)
	// verify is the journals' (journals.verify): a rebuild asks them to
	// read every claim they hold at their next prune.
	verify *atomic.Bool

	life    startstop.Base
	mu      sync.Mutex
	running map[string]bool      // promotions being rebuilt; written by begin and end under mu
	ended   map[string]time.Time // when a rebuild of each promotion last ended; under mu
	ctx     context.Context      // the rebuilds' context; set by the first begin under mu
	cancel  context.CancelFunc   // called by the keeper under mu
	wg      sync.WaitGroup       // the rebuilds; Add under mu, before the keeper waits
}

// begin reserves promotion id for a rebuild and returns the context to run
// it in, or false if one is running already or the rebuilder stopped.
func (r *rebuilder) begin(id string) (context.Context, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithCancel(context.Background())
		r.running = make(map[string]bool)
		if err := r.life.Start(r.keep); err != nil {
			r.cancel() // stopped before its first rebuild
		}
	}
	select {
	case <-r.life.Stopping():
		return nil, false
	default:
	}
	if r.running[id] {
		return nil, false
	}
	r.running[id] = true
	r.wg.Add(1)
	return r.ctx, true
}

// keep is the rebuilder's loop: once stopping, it cancels the rebuilds and
// waits for them. It takes mu to cancel, so every begin that got in before
// the stop has added to wg before keep waits on it.
func (r *rebuilder) keep(stopping <-chan struct{}) {
	<-stopping
	r.mu.Lock()
	r.cancel()
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *rebuilder) end(id string) {
	r.mu.Lock()
	delete(r.running, id)
	if r.ended == nil || len(r.ended) >= maxEnded {
		r.ended = make(map[string]time.Time)
	}
	r.ended[id] = time.Now()
	r.mu.Unlock()
	r.wg.Done()
}

func (r *rebuilder) busy(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[id]
}

// endedAfter reports whether a rebuild of promotion id ended after t.
func (r *rebuilder) endedAfter(id string, t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended[id].After(t)
}

// stop cancels the running rebuilds and waits for them; their promotions
// stay rebuilding, with the hold given up, for the next process to finish.
func (r *rebuilder) stop() {
	_ = r.life.Stop(context.Background()) // no deadline: a rebuild ends soon after its context
}

// halt stops claims of a promotion whose database lost claims Redis saw
// confirmed into it: the database was restored from an older backup, or
// failed over to a lagging replica. Rebuilding from it would hand the lost
// claims' units out again, and reconciling silently would hide that users
// hold claims the database no longer knows; so the promotion waits for an
// operator, who restores the database or accepts it with a requested
// rebuild (see docs/failure-modes.md).
func (rb *rebuilder) halt(ctx context.Context, id string, confirmed, floor int64) error {
	reason := fmt.Sprintf("database behind Redis: rank %d was confirmed into it, its highest rank is %d", confirmed, floor)
	halted, err := rb.gate.Halt(ctx, id, reason)
	if err != nil {
		return err
	}
	if halted {
		rb.log.Error("the database lost claims it had confirmed (restored from an older backup, or a lagging replica?): claims of the promotion are halted until an operator restores the database or requests a rebuild",
			"promotion", id, "redis_confirmed_rank", confirmed, "database_max_rank", floor, "missing_ranks_at_least", confirmed-floor)
	}
	if rb.onHalted != nil {
		rb.onHalted(id, true)
	}
	return nil
}

// startRebuild rebuilds the promotion in the background unless a rebuild
// of it runs in this process already; created tells that the caller had to
// create its meta hash. Stop ends it.
func (rb *rebuilder) startRebuild(p Promotion, reason string, created bool) {
	rb.startRebuildWith(p.ID, func(context.Context) (Promotion, error) { return p, nil }, reason, created)
}

func (rb *rebuilder) startRebuildWith(id string, def func(context.Context) (Promotion, error), reason string, created bool) {
	ctx, ok := rb.begin(id)
	if !ok {
		return
	}
	// Redis lost writes (or an operator asked): the journals read every
	// claim they hold at their next prune, not only the oldest.
	rb.verify.Store(true)
	go func() {
		defer rb.end(id)
		p, err := def(ctx)
		if err != nil {
			rb.log.Warn("cannot rebuild promotion; the next re-check retries", "promotion", id, "err", err)
			return
		}
		rep := rb.rebuild(ctx, p, reason, created)
		switch {
		case rep.Err == nil:
			rb.log.Warn("promotion rebuilt from the database; claims go on",
				"promotion", p.ID, "reason", reason, "claims", rep.Claims, "database_max_rank", rep.Floor,
				"seq", rep.Seq, "users_raised", rep.Restored.Users, "statuses", rep.Restored.Statuses,
				"voided", rep.Restored.Voided, "requeued", rep.Restored.Requeued, "rebuilding_for", rep.Took)
			if rep.Restored.Requeued > 0 {
				rb.wk.wakePool(p.ID)
			}
		case errors.Is(rep.Err, claim.ErrNotRebuilding):
			rb.log.Debug("promotion was rebuilt meanwhile; nothing to take over", "promotion", p.ID)
		case errors.Is(rep.Err, claim.ErrHalted):
			rb.log.Debug("promotion is halted for an operator; not rebuilding it", "promotion", p.ID)
		case errors.Is(rep.Err, claim.ErrRebuildBusy):
			rb.log.Debug("promotion is being rebuilt by another instance", "promotion", p.ID)
		case ctx.Err() != nil:
			rb.log.Info("rebuild interrupted by shutdown; the promotion stays rebuilding for the next start", "promotion", p.ID)
		default:
			rb.log.Warn("rebuild failed; the promotion stays rebuilding and the next re-check retries",
				"promotion", p.ID, "reason", reason, "err", rep.Err)
		}
		if rb.onRebuild != nil {
			rb.onRebuild(rep)
		}
	}()
}

// rebuild runs one rebuild of p: mark it rebuilding, merge the database's
// claims page by page, raise the rank counter to the database's highest
// rank, let claims go on. On failure the hold is given up and the promotion
// stays rebuilding. created
// tells that Redis was found without the promotion before this call.
func (rb *rebuilder) rebuild(ctx context.Context, p Promotion, reason string, created bool) (rep RebuildReport) {
	start := rb.now()
	rep = RebuildReport{PromotionID: p.ID, Reason: reason, Created: created}
	defer func() { rep.Took = rb.now().Sub(start) }()
	if p.retired() {
		// Retired is not lost: its Redis state was deleted on purpose.
		rep.Err = errRetired
		return rep
	}

	// The rank counter is raised by Resume, not by BeginRebuild (no SeqFloor):
	// raised before the rebuild is done, it would hide the loss from the
	// next re-check if this rebuild failed in between.
	begin := rb.gate.BeginRebuild
	switch reason {
	case reasonOrphaned, reasonFenced:
		begin = rb.gate.TakeOver
	case reasonRequested:
		begin = rb.gate.BeginRebuildHalted
	}
	if err := poolCodes(ctx, rb.st, &p); err != nil {
		rep.Err = err
		return rep
	}
	r, err := begin(ctx, p.gate(), rb.instance, DefaultRebuildHold)
	if err != nil {
		rep.Err = err
		return rep
	}
	rep.Created = rep.Created || r.Created()
	if err := rb.restoreAll(ctx, p, r, &rep); err != nil {
		rep.Err = err
		// Give the hold up so the next re-check starts over at once; a hold
		// another rebuild took is not ours, and Release leaves it alone.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if rerr := r.Release(rctx); rerr != nil {
			rep.Err = errors.Join(err, rerr)
		}
		return rep
	}
	return rep
}

// restoreAll merges every claim the database holds, then resumes with the
// database's highest rank, read after the merge, as the floor. A rank the
// database gains after that read (an issuer's batch still in flight from
// before the loss) puts the counter behind again, and the next re-check
// rebuilds once more.
func (rb *rebuilder) restoreAll(ctx context.Context, p Promotion, r *claim.Rebuild, rep *RebuildReport) error {
	var after int64
	known := make([]claim.Known, 0, claim.RestoreChunk)
	for {
		page, err := rb.st.ClaimsByRank(ctx, p.ID, after, claim.RestoreChunk)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		known = known[:0]
		for _, c := range page {
			if k, ok := knownClaim(c); ok {
				known = append(known, k)
			}
		}
		st, err := r.Restore(ctx, known)
		if err != nil {
			return err
		}
		rep.Restored.Add(st)
		rep.Claims += int64(len(page))
		after = page[len(page)-1].Rank
	}
	floors, err := rb.st.MaxRanks(ctx, []string{p.ID})
	if err != nil {
		return err
	}
	// The fence covers ranks this instance answered or confirmed that the
	// database may not show yet: Redis's counter must not fall below them.
	rep.Floor = rb.fences.knownFloor(p.ID, floors[p.ID])
	seq, err := r.Resume(ctx, rep.Floor)
	if err != nil {
		return err
	}
	rep.Seq = seq
	return nil
}

// knownClaim turns a database claim into what the gate restores. A replayed
// dead letter with no issued row is a claim an admin put back into the
// pipeline: it is restored pending, to be enqueued again if Redis lost it.
func knownClaim(c store.KnownClaim) (claim.Known, bool) {
	k := claim.Known{Rank: c.Rank, UserID: c.UserID, Slot: c.Slot, ClaimID: c.ClaimID}
	switch c.State {
	case store.StateIssued:
		k.Status, k.IssuedAt = claim.StatusIssued, c.At
		if k.IssuedAt.IsZero() {
			// The database's time could not be read: the claim is issued
			// all the same, at a time the rebuild stands in for.
			k.IssuedAt = time.Now()
		}
	case store.DeadFailed:
		k.Status = claim.StatusFailed
	case store.DeadVoided:
		k.Status = claim.StatusVoided
	case store.DeadReplayed:
		k.Status, k.AcceptedAt = claim.StatusPending, c.At
		if ms, err := strconv.ParseInt(c.Fields["at"], 10, 64); err == nil {
			k.AcceptedAt = time.UnixMilli(ms)
		}
	default:
		return k, false
	}
	// A row that cannot be restored (no user: an undecodable entry) holds
	// its rank through the floor all the same.
	return k, c.Rank > 0 && c.Slot > 0 && c.UserID != ""
}
