package promotion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// Revoked is what Manager.Revoke did.
type Revoked struct {
	// Revoked is how many claims were revoked by this call.
	Revoked int
	// Skipped are the claim ids that were not: unknown, not issued (yet),
	// of another promotion, or revoked already.
	Skipped []string
	// Pending are the revoked claim ids whose issuer's undo failed (a
	// webhook partner that is down): they are revoked, and the re-check
	// loop's sweep runs their undo again until it succeeds.
	Pending []string
	// Refused are the revoked claims whose issuer's undo was refused for
	// good (a webhook partner answered a 4xx other than 404 and 409): they
	// stay revoked in dibs, the refusal is final and not tried again.
	Refused []RefusedUndo
}

// RefusedUndo is a revoked claim whose issuer's undo was refused for good.
type RefusedUndo struct {
	ClaimID string
	// Reason is the refusal: for a webhook, its URL, status and the start
	// of its answer's body.
	Reason string
}

// revokes revokes issued claims: decided in the database, then applied
// outside it (the issuer's undo, Redis's status and stock), and swept by
// the loop where a revoke's outside steps are not recorded as done.
type revokes struct {
	st   store.Store
	gate *claim.Gate
	wk   *waker
	cfg  Config
	log  *slog.Logger
}

// revoke revokes issued claims of promotion id, as Manager.Revoke
// describes.
func (rv *revokes) revoke(ctx context.Context, id string, claimIDs []string) (Revoked, error) {
	p, err := load(ctx, rv.st, id)
	if err != nil {
		return Revoked{}, err
	}
	if p.segmented() {
		return Revoked{}, errSegmented("revoking")
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sideEffectTimeout)
	defer cancel()
	returnStock := p.RevokeReturnsStock && p.Mode != ModeGrant
	if returnStock {
		// A pool code once handed out is spent: a unit given back would
		// have no code to be issued with.
		if err := poolCodes(ctx, rv.st, &p); err != nil {
			return Revoked{}, err
		}
		returnStock = p.codes == 0
	}
	rows, err := rv.st.RevokeIssued(dctx, id, claimIDs, returnStock, rv.cfg.Now().UTC())
	if err != nil {
		return Revoked{}, domainErr(err)
	}
	out := Revoked{Revoked: len(rows)}
	for _, c := range claimIDs {
		if !slices.ContainsFunc(rows, func(is store.Issued) bool { return is.ClaimID == c }) && !slices.Contains(out.Skipped, c) {
			out.Skipped = append(out.Skipped, c)
		}
	}
	pending, refused, err := rv.applyRevokes(dctx, dctx, p, rows)
	for _, f := range pending {
		out.Pending = append(out.Pending, f.claimID)
		rv.log.WarnContext(ctx, "issuer's undo of a revoked claim failed; the sweep runs it again", "promotion", id, "claim", f.claimID, "err", f.err)
	}
	for _, f := range refused {
		out.Refused = append(out.Refused, RefusedUndo{ClaimID: f.claimID, Reason: f.err.Error()})
	}
	if err != nil {
		return out, domainErr(err)
	}
	return out, nil
}

// undoFailure is a revoked claim whose issuer's undo failed or was refused.
type undoFailure struct {
	claimID string
	err     error
}

// applyRevokes runs the outside steps of revoked claims of p — the
// issuer's undo, then Redis's status and stock — and records which are
// done. A claim whose undo failed is returned in pending, its Redis step
// not taken; a claim whose undo was refused for good (stream.ErrPermanent)
// is returned in refused, logged as an error with the refusal, and its
// other steps are taken as if the undo had succeeded, so it is not tried
// again. A pending claim and a claim whose rank Redis holds no status for (lost
// with Redis's history, not yet rebuilt) are left for the sweep, which
// runs every step again until each succeeds: a failing undo is retried,
// never dropped. Every step is idempotent: the undo by its contract
// (issue.Revoker), the Redis step because a claim already revoked is left
// alone. The undos run under undoCtx, the rest under ctx. err reports the
// failures of the Redis and database steps.
func (rv *revokes) applyRevokes(ctx, undoCtx context.Context, p Promotion, rows []store.Issued) (pending, refused []undoFailure, err error) {
	if len(rows) == 0 {
		return nil, nil, nil
	}
	var errs []error
	undone := rows[:0:0]
	if undo, ok := rv.cfg.Issuers[p.Kind].(issue.Revoker); ok {
		sp := p.toStore()
		for _, is := range rows {
			switch err := undo.Revoke(undoCtx, sp, is); {
			case errors.Is(err, stream.ErrPermanent):
				refused = append(refused, undoFailure{is.ClaimID, err})
				rv.log.Error("the issuer refused the undo of a revoked claim: the claim stays revoked and the undo is not tried again; settle it with the other system",
					"promotion", p.ID, "claim", is.ClaimID, "user", is.UserID, "err", err)
			case err != nil:
				pending = append(pending, undoFailure{is.ClaimID, err})
				continue
			}
			undone = append(undone, is)
		}
	} else {
		undone = rows
	}
	var returned, kept []int64
	for _, is := range undone {
		if is.RevokeReturned {
			returned = append(returned, is.Rank)
		} else {
			kept = append(kept, is.Rank)
		}
	}
	var unknown []int64
	for _, g := range []struct {
		ret   bool
		ranks []int64
	}{{true, returned}, {false, kept}} {
		_, u, err := rv.gate.Revoke(ctx, p.ID, g.ret, g.ranks...)
		if err != nil {
			return pending, refused, errors.Join(append(errs, fmt.Errorf("revoke %d claims of %s in Redis: %w", len(g.ranks), p.ID, err))...)
		}
		unknown = append(unknown, u...)
	}
	done := make([]string, 0, len(undone))
	for _, is := range undone {
		if !slices.Contains(unknown, is.Rank) {
			done = append(done, is.ClaimID)
		}
	}
	if err := rv.st.MarkRevokesApplied(ctx, done); err != nil {
		errs = append(errs, err)
	}
	if len(returned) > 0 {
		rv.wk.tellChanged(ctx, p.ID)
	}
	return pending, refused, errors.Join(errs...)
}

// sweepRevokes applies the outside steps of revokes decided in the
// database but never recorded as applied. It runs in the loop, so the
// issuers' undos (calls to other systems, which may hang until their
// timeout) share a budget of one re-check interval per sweep: those left
// when it is spent fail at once and wait for the next sweep.
func (rv *revokes) sweepRevokes(ctx context.Context) error {
	rows, err := rv.st.ListUnappliedRevokes(ctx, rv.cfg.Now().Add(-sweepAge*rv.cfg.RecheckInterval), sweepBatch)
	if err != nil || len(rows) == 0 {
		return err
	}
	byPromo := map[string][]store.Issued{}
	for _, is := range rows {
		byPromo[is.PromotionID] = append(byPromo[is.PromotionID], is)
	}
	undoCtx, cancel := context.WithTimeout(ctx, rv.cfg.RecheckInterval)
	defer cancel()
	var (
		errs   []error
		undone int
	)
	for id, list := range byPromo {
		p, err := load(ctx, rv.st, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pending, _, err := rv.applyRevokes(ctx, undoCtx, p, list)
		errs = append(errs, err)
		undone += len(pending)
		if len(pending) > 0 {
			rv.log.Warn("issuer's undo of revoked claims still fails; the next sweep runs it again",
				"promotion", id, "claims", len(pending), "first", pending[0].claimID, "err", pending[0].err)
		}
	}
	rv.log.Warn("applied revokes left unfinished", "revokes", len(rows), "still_pending", undone)
	return errors.Join(errs...)
}
