package promotion

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/store"
)

// Revoked is what Manager.Revoke did.
type Revoked struct {
	// Revoked is how many claims were revoked by this call.
	Revoked int
	// Skipped are the claim ids that were not: unknown, not issued (yet),
	// of another promotion, or revoked already.
	Skipped []string
}

// Revoke revokes issued claims of the promotion: each one's status becomes
// StatusRevoked, its code is no longer valid, its points are debited, the
// issuer's undo runs (an issue.Revoker, for issuers that call out), and,
// if the promotion's RevokeReturnsStock is set, its unit goes back to
// stock the way a void gives one back. Claims not issued are skipped and
// reported.
//
// Like a dead-letter transition it is decided in the database (one
// transaction marks the claims revoked, with their codes and points, so a
// claim is revoked once however often or concurrently this is called) and
// then applied outside it (Redis's status and stock, the issuer's undo);
// the rest is finished even if ctx ends, and a revoke whose outside steps
// are not recorded as done is applied again by the re-check loop's sweep.
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
	rows, err := m.st.RevokeIssued(dctx, id, claimIDs, p.RevokeReturnsStock && p.Mode != ModeGrant, m.cfg.Now().UTC())
	if err != nil {
		return Revoked{}, domainErr(err)
	}
	out := Revoked{Revoked: len(rows)}
	for _, c := range claimIDs {
		if !slices.ContainsFunc(rows, func(is store.Issued) bool { return is.ClaimID == c }) && !slices.Contains(out.Skipped, c) {
			out.Skipped = append(out.Skipped, c)
		}
	}
	if err := m.applyRevokes(dctx, p, rows); err != nil {
		return out, domainErr(err)
	}
	if len(rows) > 0 {
		m.revokeEvents(dctx, p, rows)
	}
	return out, nil
}

// applyRevokes runs the outside steps of revoked claims of p — the
// issuer's undo, then Redis's status and stock — and records which are
// done. A claim whose rank Redis holds no status for (lost with Redis's
// history, not yet rebuilt) or whose undo failed is left for the sweep.
// Every step is idempotent: the undo by its contract (issue.Revoker), the
// Redis step because a claim already revoked is left alone.
func (m *Manager) applyRevokes(ctx context.Context, p Promotion, rows []store.Issued) error {
	if len(rows) == 0 {
		return nil
	}
	var errs []error
	undone := rows[:0:0]
	if rv, ok := m.cfg.Issuers[p.Kind].(issue.Revoker); ok {
		sp := p.toStore()
		for _, is := range rows {
			if err := rv.Revoke(ctx, sp, is); err != nil {
				errs = append(errs, fmt.Errorf("undo claim %s: %w", is.ClaimID, err))
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
		_, u, err := m.gate.Revoke(ctx, p.ID, g.ret, g.ranks...)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("revoke %d claims of %s in Redis: %w", len(g.ranks), p.ID, err))...)
		}
		unknown = append(unknown, u...)
	}
	done := make([]string, 0, len(undone))
	for _, is := range undone {
		if !slices.Contains(unknown, is.Rank) {
			done = append(done, is.ClaimID)
		}
	}
	if err := m.st.MarkRevokesApplied(ctx, done); err != nil {
		errs = append(errs, err)
	}
	if len(returned) > 0 {
		m.tellChanged(ctx, p.ID)
	}
	return errors.Join(errs...)
}

// sweepRevokes applies the outside steps of revokes decided in the
// database but never recorded as applied.
func (m *Manager) sweepRevokes(ctx context.Context) error {
	rows, err := m.st.ListUnappliedRevokes(ctx, m.cfg.Now().Add(-sweepAge*m.cfg.RecheckInterval), sweepBatch)
	if err != nil || len(rows) == 0 {
		return err
	}
	byPromo := map[string][]store.Issued{}
	for _, is := range rows {
		byPromo[is.PromotionID] = append(byPromo[is.PromotionID], is)
	}
	var errs []error
	for id, list := range byPromo {
		p, err := m.load(ctx, id)
		if err == nil {
			err = m.applyRevokes(ctx, p, list)
		}
		errs = append(errs, err)
	}
	m.log.Warn("applied revokes left unfinished", "revokes", len(rows))
	return errors.Join(errs...)
}

// revokeEvents is where the events of revoked claims are recorded, one per
// claim, once the revoke is decided. It records nothing yet: the events
// outbox writes them here.
func (m *Manager) revokeEvents(ctx context.Context, p Promotion, rows []store.Issued) {
	_, _, _ = ctx, p, rows
}
