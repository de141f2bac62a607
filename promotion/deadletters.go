package promotion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// Dead-letter transitions are decided in the database (one statement moves a
// claim out of failed, so a replay and a void never both act on it) and
// then applied in Redis (re-enqueue the claim, or return its unit to stock).
// The Redis step runs detached from the caller, and a transition whose Redis
// step was never recorded as done — the process died, Redis failed, the
// request was cancelled — is applied again by the re-check loop's sweep. Both
// steps are idempotent: a re-enqueued claim that is issued twice is a
// Duplicate, and a unit is returned only by the claim's first void.
const (
	// sideEffectTimeout bounds one transition's database and Redis steps.
	sideEffectTimeout = 30 * time.Second
	// sweepEvery is how often, in re-check intervals, the re-check loop looks
	// for transitions whose Redis step is not recorded as done.
	sweepEvery = 5
	// sweepAge is how old, in re-check intervals, such a transition must be,
	// so a sweep does not race the request that is applying it right now.
	sweepAge = 5
	// sweepBatch bounds one sweep.
	sweepBatch = 500
	// replayPage is how many failed claims a replay of all moves per step.
	replayPage = 500
)

// deadLetters records the dead letters the pools write, and replays,
// voids and sweeps them. Its methods run in the pools' goroutines (the
// record), in requests (replay, void) and in the loop (the sweep).
type deadLetters struct {
	st   store.Store
	gate *claim.Gate
	so   *segmentOps
	wk   *waker
	cfg  Config
	log  *slog.Logger
}

// deadLettererOn records a claim the stream runtime gave up on: in the
// database (the dead_letters row an admin lists, replays or voids) and as
// failed in Redis. A claim the database already holds as issued — its
// acknowledgement was lost and the redeliveries ran out — is no dead
// letter: it is acknowledged as issued instead. keyID names the Redis keys of the stream (the promotion's own, or one of
// its segments').
func (dl *deadLetters) deadLettererOn(id, keyID string) func(context.Context, stream.DeadLetter) error {
	return func(ctx context.Context, d stream.DeadLetter) error {
		rank, _ := strconv.ParseInt(d.Fields["rank"], 10, 64)
		slot, _ := strconv.Atoi(d.Fields["slot"])
		claimID := d.Fields["claim_id"]
		if claimID == "" {
			// An undecodable entry still needs an identity in the database.
			claimID = claim.UndecodableID(id, d.ID)
		}
		if user := d.Fields["user"]; ValidID(user) && d.Fields["claim_id"] != "" {
			issued, err := dl.st.ListIssued(ctx, id, user)
			if err != nil {
				return err
			}
			for _, is := range issued {
				if is.ClaimID == claimID {
					if _, err := dl.gate.Ack(ctx, keyID, []claim.Entry{{ID: d.ID, Rank: d.Fields["rank"]}}); err != nil {
						return err
					}
					return stream.ErrResolved
				}
			}
		}
		// Redis first: a claim the database holds as failed is always
		// failed (or further on) in Redis, which makes a replay's Redis step
		// idempotent (it re-enqueues only a failed claim).
		if rank > 0 {
			if err := dl.gate.MarkFailed(ctx, keyID, rank); err != nil {
				return err
			}
		}
		_, err := dl.recordDeadLetter(ctx, store.DeadLetter{
			ClaimID:     claimID,
			PromotionID: id,
			UserID:      d.Fields["user"],
			Rank:        rank,
			Slot:        slot,
			Reason:      d.Reason,
			Deliveries:  d.Deliveries,
			State:       store.DeadFailed,
			At:          d.At,
			Fields:      d.Fields,
		})
		if err != nil {
			return err
		}
		if dl.cfg.OnDeadLetter != nil {
			dl.cfg.OnDeadLetter(id)
		}
		dl.log.Warn("claim dead-lettered", "promotion", id, "claim_id", claimID, "reason", d.Reason, "deliveries", d.Deliveries)
		return nil
	}
}

// recordDeadLetter records d and returns the claim id it is recorded
// under. A claim whose id the database holds for a different claim — a rank
// handed out twice after Redis lost writes — is recorded under an id of its
// own (claim.CollisionID), so it neither overwrites nor vanishes into the
// stored one.
func (dl *deadLetters) recordDeadLetter(ctx context.Context, d store.DeadLetter) (string, error) {
	err := dl.st.RecordDeadLetter(ctx, d)
	if errors.Is(err, store.ErrClaimMismatch) && d.UserID != "" {
		d.ClaimID = claim.CollisionID(d.ClaimID, d.UserID)
		err = dl.st.RecordDeadLetter(ctx, d)
	}
	return d.ClaimID, err
}

// replay puts failed claims of promotion id back into the pipeline (see
// Manager.Replay) and returns how many it replayed.
func (dl *deadLetters) replay(ctx context.Context, id string, claimIDs []string) (int, error) {
	if err := notRetired(ctx, dl.st, id); err != nil {
		return 0, err
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sideEffectTimeout)
	defer cancel()
	if claimIDs != nil {
		moved, err := dl.st.TransitionDeadLetters(dctx, id, claimIDs, store.DeadReplayed)
		if err != nil {
			return 0, err
		}
		return len(moved), dl.applyReplays(dctx, id, moved)
	}
	// All of them, a page at a time, so one call never holds every failed
	// claim in memory and a failure leaves little undone. The cursor only
	// moves forward: a claim that fails again during the call is not
	// replayed twice by it.
	total, after := 0, ""
	for {
		page, err := dl.st.ListDeadLetters(dctx, id, after, replayPage)
		if err != nil || len(page) == 0 {
			return total, err
		}
		after = page[len(page)-1].ClaimID
		ids := make([]string, len(page))
		for i, d := range page {
			ids[i] = d.ClaimID
		}
		moved, err := dl.st.TransitionDeadLetters(dctx, id, ids, store.DeadReplayed)
		if err != nil {
			return total, err
		}
		total += len(moved)
		if err := dl.applyReplays(dctx, id, moved); err != nil {
			return total, err
		}
	}
}

// applyReplays re-enqueues replayed claims and records that it did.
func (dl *deadLetters) applyReplays(ctx context.Context, id string, moved []store.DeadLetter) error {
	if len(moved) == 0 {
		return nil
	}
	// A replay brings work back to a promotion that may have been drained:
	// watch it again, or nothing would confirm the replayed claims after a
	// restart. This comes after the claims moved to replayed in the
	// database, so a drain deciding at the same moment either sees them
	// short (and undoes itself) or is undone here.
	if err := dl.st.SetDrained(ctx, id, false); err != nil {
		return err
	}
	segs, err := dl.so.segmentsFor(ctx, id)
	if err != nil {
		return err
	}
	done := make([]string, 0, len(moved))
	for _, d := range moved {
		if len(d.Fields) == 0 || d.Rank < 1 {
			done = append(done, d.ClaimID) // nothing to re-enqueue
			continue
		}
		if _, err = dl.gate.Replay(ctx, segs.TagOfRank(d.Rank), d.Rank, d.Fields); errors.Is(err, claim.ErrUnknownRank) {
			// Redis lost the claim and a rebuild has not restored it yet:
			// nothing happened, so it is not marked applied, and the sweep
			// applies it once the rebuild has written its status.
			err = nil
			continue
		}
		if err != nil {
			err = fmt.Errorf("replay %s: %w", d.ClaimID, err)
			break
		}
		done = append(done, d.ClaimID)
	}
	if len(done) > 0 {
		if merr := dl.st.MarkDeadLettersApplied(ctx, store.DeadReplayed, done); merr != nil {
			err = errors.Join(err, merr)
		}
		for _, tag := range segs.Tags() {
			dl.wk.wakePool(tag)
		}
	}
	return err
}

// void moves failed claims of promotion id to voided in the database and
// returns their units to stock (see Manager.Void); the rest of the work is
// finished even if ctx ends (see the sweep).
func (dl *deadLetters) void(ctx context.Context, id string, claimIDs []string) (int, error) {
	if err := notRetired(ctx, dl.st, id); err != nil {
		return 0, err
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sideEffectTimeout)
	defer cancel()
	moved, err := dl.st.TransitionDeadLetters(dctx, id, claimIDs, store.DeadVoided)
	if err != nil {
		return 0, domainErr(err)
	}
	return len(moved), domainErr(dl.applyVoids(dctx, id, moved))
}

// applyVoids returns the voided claims' units to stock and records that it did.
func (dl *deadLetters) applyVoids(ctx context.Context, id string, moved []store.DeadLetter) error {
	if len(moved) == 0 {
		return nil
	}
	ranks := make([]int64, 0, len(moved))
	for _, d := range moved {
		if d.Rank > 0 {
			ranks = append(ranks, d.Rank)
		}
	}
	voided, unknown, err := dl.so.voidRanks(ctx, id, ranks)
	if err != nil {
		return err
	}
	// A rank Redis holds no status for was lost with a loss of Redis's
	// history, and no rebuild has restored it yet: nothing happened to it,
	// so it is not marked applied, and the sweep voids it once the rebuild
	// has written its status.
	ids := make([]string, 0, len(moved))
	for _, d := range moved {
		if !slices.Contains(unknown, d.Rank) {
			ids = append(ids, d.ClaimID)
		}
	}
	if voided > 0 {
		// Units went back to stock: instances that remember the promotion
		// sold out must ask Redis again.
		dl.wk.tellChanged(ctx, id)
	}
	return dl.st.MarkDeadLettersApplied(ctx, store.DeadVoided, ids)
}

// sweepDeadLetters applies the Redis step of dead-letter transitions that
// were decided in the database but never recorded as applied.
func (dl *deadLetters) sweepDeadLetters(ctx context.Context) error {
	ds, err := dl.st.ListUnappliedDeadLetters(ctx, dl.cfg.Now().Add(-sweepAge*dl.cfg.RecheckInterval), sweepBatch)
	if err != nil || len(ds) == 0 {
		return err
	}
	replays := map[string][]store.DeadLetter{}
	voids := map[string][]store.DeadLetter{}
	for _, d := range ds {
		if d.State == store.DeadVoided {
			voids[d.PromotionID] = append(voids[d.PromotionID], d)
		} else {
			replays[d.PromotionID] = append(replays[d.PromotionID], d)
		}
	}
	var errs []error
	for id, list := range replays {
		errs = append(errs, dl.applyReplays(ctx, id, list))
	}
	for id, list := range voids {
		errs = append(errs, dl.applyVoids(ctx, id, list))
	}
	dl.log.Warn("applied dead-letter transitions left unfinished", "replays", len(ds)-countVoids(voids), "voids", countVoids(voids))
	return errors.Join(errs...)
}

func countVoids(v map[string][]store.DeadLetter) int {
	n := 0
	for _, l := range v {
		n += len(l)
	}
	return n
}
