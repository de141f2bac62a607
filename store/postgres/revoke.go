package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

// UpdatePromotion applies c to the promotion in one transaction, with its
// promotion.changed event, and returns it as it is now; ErrNotFound if
// absent. The row is locked as it is read, so the event's old values are
// the ones the change replaced.
func (s *Store) UpdatePromotion(ctx context.Context, id string, c store.PromotionChange) (store.Promotion, error) {
	if c.At.IsZero() {
		c.At = time.Now()
	}
	set, args := sqlstore.ChangeSet(c, func(n int) string { return "$" + strconv.Itoa(n) },
		func(t time.Time) any { return pgTime(t) })
	args = append(args, id)
	var p store.Promotion
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		before, err := scanPromotion(tx.QueryRow(ctx, `SELECT `+sqlstore.PromotionCols+` FROM promotions WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		if p, err = scanPromotion(tx.QueryRow(ctx,
			`UPDATE promotions SET `+set+` WHERE id = $`+strconv.Itoa(len(args))+` RETURNING `+sqlstore.PromotionCols,
			args...)); err != nil {
			return err
		}
		e, changed, err := sqlstore.ChangeEvent(before, p, c.At)
		if err != nil || !changed {
			return err
		}
		_, err = writeEvents(ctx, tx, []store.Event{e})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Promotion{}, fmt.Errorf("postgres: update promotion %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Promotion{}, wrapErr("update promotion "+id, err)
	}
	return p, nil
}

// RevokeIssued revokes the named issued claims not revoked yet, with their
// codes, points and claim.revoked events, in one transaction. A concurrent revoke of the same
// claim waits on its row and, finding it revoked, skips it.
func (s *Store) RevokeIssued(ctx context.Context, promotionID string, claimIDs []string, returnStock bool, at time.Time) ([]store.Issued, error) {
	if len(claimIDs) == 0 {
		return nil, nil
	}
	var out []store.Issued
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE issued SET revoked_at = $1, revoke_returned = $2, revoke_applied = false
			WHERE promotion_id = $3 AND revoked_at IS NULL AND claim_id = ANY($4::text[])
			RETURNING claim_id`, pgTime(at), returnStock, promotionID, claimIDs)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(ids) == 0 {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE codes SET revoked_at = $1 WHERE revoked_at IS NULL AND claim_id = ANY($2::text[])`,
			pgTime(at), ids); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO ledger (claim_id, user_id, promotion_id, amount, at)
			SELECT claim_id || '`+sqlstore.RevokeSuffix+`', user_id, promotion_id, -amount, $1 FROM ledger
			WHERE claim_id = ANY($2::text[]) AND amount <> 0
			ON CONFLICT (claim_id) DO NOTHING`, pgTime(at), ids); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT `+sqlstore.IssuedCols+` FROM `+sqlstore.IssuedFrom+`
			WHERE i.claim_id = ANY($1::text[]) ORDER BY i.claim_id`, ids)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Issued, error) {
			return sqlstore.ScanIssued(row, pgTimes)
		})
		if err != nil {
			return err
		}
		evs, err := sqlstore.RevokeEvents(out)
		if err != nil {
			return err
		}
		_, err = writeEvents(ctx, tx, evs)
		return err
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
	_, err := s.pool.Exec(ctx, `UPDATE issued SET revoke_applied = true
		WHERE NOT revoke_applied AND claim_id = ANY($1::text[])`, claimIDs)
	return wrapErr("mark revokes applied", err)
}

// ListUnappliedRevokes returns up to limit revokes not recorded as applied
// that were made before revokedBefore, oldest first.
func (s *Store) ListUnappliedRevokes(ctx context.Context, revokedBefore time.Time, limit int) ([]store.Issued, error) {
	if limit <= 0 {
		return nil, nil
	}
	return s.issuedRows(ctx, "list unapplied revokes", `SELECT `+sqlstore.IssuedCols+` FROM `+sqlstore.IssuedFrom+`
		WHERE NOT i.revoke_applied AND i.revoked_at < $1 ORDER BY i.revoked_at, i.claim_id LIMIT $2`,
		pgTime(revokedBefore), limit)
}
