package promotion

import (
	"context"
	"errors"
	"fmt"
	"slices"

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

// Revoke revokes issued claims of the promotion: each one's status becomes
// StatusRevoked, its code is no longer valid, its points are debited, the
// issuer's undo runs (an issue.Revoker, for issuers that call out), and,
// if the promotion's RevokeReturnsStock is set, its unit goes back to
// stock the way a void gives one back (never in a promotion with a code
// pool: the claim's code is spent, and a unit given back would have none). Claims not issued are skipped and
// reported.
//
// Like a dead-letter transition it is decided in the database (one
// transaction marks the claims revoked, with their codes and points, so a
// claim is revoked once however often or concurrently this is called) and
// then applied outside it (Redis's status and stock, the issuer's undo);
// the rest is finished even if ctx ends, and a revoke whose outside steps
// are not recorded as done is applied again by the re-check loop's sweep.
// A failing undo is no error of Revoke: the claim is revoked, reported in
// Pending, and its undo (then its Redis step) is retried by the sweep. An
// undo the other system refused (an error wrapping stream.ErrPermanent,
// such as a webhook's 400) is final: the claim stays revoked, the refusal
// is reported in Refused and logged with the answer, and it is not tried
// again (a refusal repeats; the partner's operator settles it by hand).
// The revoke's claim.revoked events are written with its database
// transaction.
func (m *Manager) Revoke(ctx context.Context, id string, claimIDs []string) (Revoked, error) {
	p, err := m.load(ctx, id)
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
		if err := m.op.poolCodes(ctx, &p); err != nil {
			return Revoked{}, err
		}
		returnStock = p.codes == 0
	}
	rows, err := m.st.RevokeIssued(dctx, id, claimIDs, returnStock, m.cfg.Now().UTC())
	if err != nil {
		return Revoked{}, domainErr(err)
	}
	out := Revoked{Revoked: len(rows)}
	for _, c := range claimIDs {
		if !slices.ContainsFunc(rows, func(is store.Issued) bool { return is.ClaimID == c }) && !slices.Contains(out.Skipped, c) {
			out.Skipped = append(out.Skipped, c)
		}
	}
	pending, refused, err := m.ch.applyRevokes(dctx, dctx, p, rows)
	for _, f := range pending {
		out.Pending = append(out.Pending, f.claimID)
		m.log.WarnContext(ctx, "issuer's undo of a revoked claim failed; the sweep runs it again", "promotion", id, "claim", f.claimID, "err", f.err)
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
func (ch *changes) applyRevokes(ctx, undoCtx context.Context, p Promotion, rows []store.Issued) (pending, refused []undoFailure, err error) {
	if len(rows) == 0 {
		return nil, nil, nil
	}
	var errs []error
	undone := rows[:0:0]
	if rv, ok := ch.m.cfg.Issuers[p.Kind].(issue.Revoker); ok {
		sp := p.toStore()
		for _, is := range rows {
			switch err := rv.Revoke(undoCtx, sp, is); {
			case errors.Is(err, stream.ErrPermanent):
				refused = append(refused, undoFailure{is.ClaimID, err})
				ch.m.log.Error("the issuer refused the undo of a revoked claim: the claim stays revoked and the undo is not tried again; settle it with the other system",
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
		_, u, err := ch.m.gate.Revoke(ctx, p.ID, g.ret, g.ranks...)
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
	if err := ch.m.st.MarkRevokesApplied(ctx, done); err != nil {
		errs = append(errs, err)
	}
	if len(returned) > 0 {
		ch.tellChanged(ctx, p.ID)
	}
	return pending, refused, errors.Join(errs...)
}

// sweepRevokes applies the outside steps of revokes decided in the
// database but never recorded as applied. It runs in the loop, so the
// issuers' undos (calls to other systems, which may hang until their
// timeout) share a budget of one re-check interval per sweep: those left
// when it is spent fail at once and wait for the next sweep.
func (ch *changes) sweepRevokes(ctx context.Context) error {
	rows, err := ch.m.st.ListUnappliedRevokes(ctx, ch.m.cfg.Now().Add(-sweepAge*ch.m.cfg.RecheckInterval), sweepBatch)
	if err != nil || len(rows) == 0 {
		return err
	}
	byPromo := map[string][]store.Issued{}
	for _, is := range rows {
		byPromo[is.PromotionID] = append(byPromo[is.PromotionID], is)
	}
	undoCtx, cancel := context.WithTimeout(ctx, ch.m.cfg.RecheckInterval)
	defer cancel()
	var (
		errs   []error
		undone int
	)
	for id, list := range byPromo {
		p, err := ch.m.load(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pending, _, err := ch.applyRevokes(ctx, undoCtx, p, list)
		errs = append(errs, err)
		undone += len(pending)
		if len(pending) > 0 {
			ch.m.log.Warn("issuer's undo of revoked claims still fails; the next sweep runs it again",
				"promotion", id, "claims", len(pending), "first", pending[0].claimID, "err", pending[0].err)
		}
	}
	ch.m.log.Warn("applied revokes left unfinished", "revokes", len(rows), "still_pending", undone)
	return errors.Join(errs...)
}
