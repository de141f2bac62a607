package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

func scanPromotion(row sqlstore.Scanner) (store.Promotion, error) {
	return sqlstore.ScanPromotion(row, liteTimes)
}

func queryPromotions(ctx context.Context, db *sql.DB, query string, args ...any) ([]store.Promotion, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlstore.Collect(rows, scanPromotion)
}

// promotionValues are the placeholders of a promotion insert.
var promotionValues = sqlstore.PromotionPlaceholders(func(int) string { return "?" })

// CreatePromotion inserts p; ErrAlreadyExists if the id is taken. A zero
// CreatedAt is set to now.
func (s *Store) CreatePromotion(ctx context.Context, p store.Promotion) error {
	if p.CreatedAt.IsZero() {
		p.CreatedAt = time.Now()
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO promotions (`+sqlstore.PromotionCols+`)
		VALUES (`+promotionValues+`)
		ON CONFLICT (id) DO NOTHING`,
		sqlstore.PromotionArgs(p, liteTimes)...)
	if err != nil {
		return wrapErr("create promotion "+p.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return wrapErr("create promotion "+p.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("sqlite: create promotion %s: %w", p.ID, store.ErrAlreadyExists)
	}
	return nil
}

// GetPromotion returns the promotion or ErrNotFound.
func (s *Store) GetPromotion(ctx context.Context, id string) (store.Promotion, error) {
	p, err := scanPromotion(s.r.QueryRowContext(ctx,
		`SELECT `+sqlstore.PromotionCols+` FROM promotions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Promotion{}, fmt.Errorf("sqlite: get promotion %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Promotion{}, wrapErr("get promotion "+id, err)
	}
	return p, nil
}

// ListPromotions returns up to limit promotions with id > after, ordered by
// id. A limit of zero or less returns none.
func (s *Store) ListPromotions(ctx context.Context, after string, limit int) ([]store.Promotion, error) {
	if limit <= 0 {
		return nil, nil
	}
	ps, err := queryPromotions(ctx, s.r,
		`SELECT `+sqlstore.PromotionCols+` FROM promotions WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, wrapErr("list promotions", err)
	}
	return ps, nil
}

// ListUndrained returns every promotion whose Drained flag is false, ordered by id.
func (s *Store) ListUndrained(ctx context.Context) ([]store.Promotion, error) {
	ps, err := queryPromotions(ctx, s.r,
		`SELECT `+sqlstore.PromotionCols+` FROM promotions WHERE drained = 0 ORDER BY id`)
	if err != nil {
		return nil, wrapErr("list undrained promotions", err)
	}
	return ps, nil
}

// ClosePromotion sets ClosedAt (if not yet set) and returns the promotion;
// ErrNotFound if absent. Closing twice keeps the first time.
func (s *Store) ClosePromotion(ctx context.Context, id string, at time.Time) (store.Promotion, error) {
	p, err := scanPromotion(s.w.QueryRowContext(ctx,
		`UPDATE promotions SET closed_at = COALESCE(closed_at, ?) WHERE id = ? RETURNING `+sqlstore.PromotionCols,
		fmtTime(at), id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Promotion{}, fmt.Errorf("sqlite: close promotion %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Promotion{}, wrapErr("close promotion "+id, err)
	}
	return p, nil
}

// SetDrained marks the promotion drained (or not); ErrNotFound if absent.
// Drained, it keeps DrainedAt or sets it to now; undrained, it clears it.
func (s *Store) SetDrained(ctx context.Context, id string, drained bool) error {
	if drained {
		return s.MarkDrained(ctx, id, time.Now())
	}
	err := s.setDrained(ctx, id, `UPDATE promotions SET drained = 0, drained_at = NULL WHERE id = ? AND retired_at IS NULL`, id)
	if errors.Is(err, store.ErrNotFound) {
		if _, gerr := s.GetPromotion(ctx, id); gerr == nil {
			return fmt.Errorf("sqlite: set undrained %s: %w", id, store.ErrRetired)
		}
	}
	return err
}

// MarkDrained marks the promotion drained at at, keeping an earlier
// DrainedAt; ErrNotFound if absent.
func (s *Store) MarkDrained(ctx context.Context, id string, at time.Time) error {
	return s.setDrained(ctx, id,
		`UPDATE promotions SET drained = 1, drained_at = COALESCE(drained_at, ?) WHERE id = ?`, fmtTime(at), id)
}

func (s *Store) setDrained(ctx context.Context, id, query string, args ...any) error {
	res, err := s.w.ExecContext(ctx, query, args...)
	if err != nil {
		return wrapErr("set drained "+id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return wrapErr("set drained "+id, err)
	}
	if n == 0 {
		return fmt.Errorf("sqlite: set drained %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// ListRetirable returns up to limit drained promotions drained at or before
// drainedBefore that are not retired or were retired at or after
// retiredSince: the unretired first, then by drained_at and id.
func (s *Store) ListRetirable(ctx context.Context, drainedBefore, retiredSince time.Time, limit int) ([]store.Promotion, error) {
	if limit <= 0 {
		return nil, nil
	}
	ps, err := queryPromotions(ctx, s.r, `SELECT `+sqlstore.PromotionCols+` FROM promotions
		WHERE drained <> 0 AND drained_at <= ? AND (retired_at IS NULL OR retired_at >= ?)
		ORDER BY retired_at IS NOT NULL, drained_at, id LIMIT ?`, fmtTime(drainedBefore), fmtTime(retiredSince), limit)
	if err != nil {
		return nil, wrapErr("list retirable promotions", err)
	}
	return ps, nil
}

// RetirePromotion marks the drained promotion retired at at (keeping an
// earlier time) and returns it; ErrNotRetirable if it is not drained,
// ErrNotFound if absent.
func (s *Store) RetirePromotion(ctx context.Context, id string, at time.Time) (store.Promotion, error) {
	p, err := scanPromotion(s.w.QueryRowContext(ctx,
		`UPDATE promotions SET retired_at = COALESCE(retired_at, ?) WHERE id = ? AND drained <> 0 RETURNING `+sqlstore.PromotionCols,
		fmtTime(at), id))
	if errors.Is(err, sql.ErrNoRows) {
		if _, gerr := s.GetPromotion(ctx, id); gerr != nil {
			return store.Promotion{}, gerr
		}
		return store.Promotion{}, fmt.Errorf("sqlite: retire promotion %s: %w", id, store.ErrNotRetirable)
	}
	if err != nil {
		return store.Promotion{}, wrapErr("retire promotion "+id, err)
	}
	return p, nil
}
