package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

// UpdatePromotion applies c to the promotion in one write transaction,
// with its promotion.changed event, and returns it as it is now;
// ErrNotFound if absent.
func (s *Store) UpdatePromotion(ctx context.Context, id string, c store.PromotionChange) (store.Promotion, error) {
	if c.At.IsZero() {
		c.At = time.Now()
	}
	set, args := sqlstore.ChangeSet(c, func(int) string { return "?" }, func(t time.Time) any { return fmtTime(t) })
	var p store.Promotion
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		before, err := scanPromotion(tx.QueryRowContext(ctx, `SELECT `+sqlstore.PromotionCols+` FROM promotions WHERE id = ?`, id))
		if err != nil {
			return err
		}
		if p, err = scanPromotion(tx.QueryRowContext(ctx,
			`UPDATE promotions SET `+set+` WHERE id = ? RETURNING `+sqlstore.PromotionCols,
			append(args, id)...)); err != nil {
			return err
		}
		e, changed, err := sqlstore.ChangeEvent(before, p, c.At)
		if err != nil || !changed {
			return err
		}
		return writeEvents(ctx, tx, []store.Event{e})
	})
	if errors.Is(err, sql.ErrNoRows) {
		return store.Promotion{}, fmt.Errorf("sqlite: update promotion %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Promotion{}, wrapErr("update promotion "+id, err)
	}
	return p, nil
}

// placeholders returns n comma-separated "?".
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// RevokeIssued revokes the named issued claims not revoked yet, with their
// codes, points and claim.revoked events, in one write transaction.
func (s *Store) RevokeIssued(ctx context.Context, promotionID string, claimIDs []string, returnStock bool, at time.Time) ([]store.Issued, error) {
	if len(claimIDs) == 0 {
		return nil, nil
	}
	var out []store.Issued
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		args := []any{fmtTime(at), returnStock, promotionID}
		for _, c := range claimIDs {
			args = append(args, c)
		}
		// The claims are found by claim id; "+" keeps SQLite from
		// scanning the promotion's rows by the primary key instead.
		rows, err := tx.QueryContext(ctx, `UPDATE issued SET revoked_at = ?, revoke_returned = ?, revoke_applied = 0
			WHERE +promotion_id = ? AND revoked_at IS NULL AND claim_id IN (`+placeholders(len(claimIDs))+`)
			RETURNING claim_id`, args...)
		if err != nil {
			return err
		}
		ids, err := sqlstore.Collect(rows, func(r sqlstore.Scanner) (any, error) {
			var id string
			return id, r.Scan(&id)
		})
		_ = rows.Close()
		if err != nil || len(ids) == 0 {
			return err
		}
		in := placeholders(len(ids))
		if _, err := tx.ExecContext(ctx, `UPDATE codes SET revoked_at = ? WHERE revoked_at IS NULL AND claim_id IN (`+in+`)`,
			append([]any{fmtTime(at)}, ids...)...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (claim_id, user_id, promotion_id, amount, at)
			SELECT claim_id || '`+sqlstore.RevokeSuffix+`', user_id, promotion_id, -amount, ? FROM ledger
			WHERE claim_id IN (`+in+`) AND amount <> 0
			ON CONFLICT (claim_id) DO NOTHING`, append([]any{fmtTime(at)}, ids...)...); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT `+sqlstore.IssuedCols+` FROM `+sqlstore.IssuedFrom+`
			WHERE i.claim_id IN (`+in+`) ORDER BY i.claim_id`, ids...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = sqlstore.Collect(rows, func(row sqlstore.Scanner) (store.Issued, error) {
			return sqlstore.ScanIssued(row, liteTimes)
		})
		if err != nil {
			return err
		}
		evs, err := sqlstore.RevokeEvents(out)
		if err != nil {
			return err
		}
		return writeEvents(ctx, tx, evs)
	})
	if err != nil {
		return nil, wrapErr("revoke issued", err)
	}
	return out, nil
}

// MarkRevokesApplied records that the named revokes' outside steps were done.
func (s *Store) MarkRevokesApplied(ctx context.Context, claimIDs []string) error {
	if len(claimIDs) == 0 {
		return nil
	}
	args := make([]any, len(claimIDs))
	for i, c := range claimIDs {
		args[i] = c
	}
	_, err := s.w.ExecContext(ctx, `UPDATE issued SET revoke_applied = 1
		WHERE revoke_applied = 0 AND claim_id IN (`+placeholders(len(claimIDs))+`)`, args...)
	return wrapErr("mark revokes applied", err)
}

// ListUnappliedRevokes returns up to limit revokes not recorded as applied
// that were made before revokedBefore, oldest first.
func (s *Store) ListUnappliedRevokes(ctx context.Context, revokedBefore time.Time, limit int) ([]store.Issued, error) {
	if limit <= 0 {
		return nil, nil
	}
	return s.issuedRows(ctx, "list unapplied revokes", `SELECT `+sqlstore.IssuedCols+` FROM `+sqlstore.IssuedFrom+`
		WHERE i.revoke_applied = 0 AND i.revoked_at < ? ORDER BY i.revoked_at, i.claim_id LIMIT ?`,
		fmtTime(revokedBefore), limit)
}
