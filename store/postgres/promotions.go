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

func scanPromotion(row pgx.Row) (store.Promotion, error) {
	return sqlstore.ScanPromotion(row, pgTimes)
}

func (s *Store) queryPromotions(ctx context.Context, query string, args ...any) ([]store.Promotion, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Promotion, error) {
		return scanPromotion(row)
	})
}

// promotionValues are the placeholders of a promotion insert; a zero
// created_at (the 11th column) is the database's now().
var promotionValues = sqlstore.PromotionPlaceholders(func(i int) string {
	if i == 11 {
		return "COALESCE($11, now())"
	}
	return "$" + strconv.Itoa(i)
})

// CreatePromotion inserts p; ErrAlreadyExists if the id is taken. A zero
// CreatedAt is set to the database's now().
func (s *Store) CreatePromotion(ctx context.Context, p store.Promotion) error {
	tag, err := s.pool.Exec(ctx, `INSERT INTO promotions (`+sqlstore.PromotionCols+`)
		VALUES (`+promotionValues+`)
		ON CONFLICT (id) DO NOTHING`,
		sqlstore.PromotionArgs(p, pgTimes)...)
	if err != nil {
		return wrapErr("create promotion "+p.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: create promotion %s: %w", p.ID, store.ErrAlreadyExists)
	}
	return nil
}

// GetPromotion returns the promotion or ErrNotFound.
func (s *Store) GetPromotion(ctx context.Context, id string) (store.Promotion, error) {
	p, err := scanPromotion(s.pool.QueryRow(ctx, `SELECT `+sqlstore.PromotionCols+` FROM promotions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Promotion{}, fmt.Errorf("postgres: get promotion %s: %w", id, store.ErrNotFound)
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
	ps, err := s.queryPromotions(ctx,
		`SELECT `+sqlstore.PromotionCols+` FROM promotions WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	if err != nil {
		return nil, wrapErr("list promotions", err)
	}
	return ps, nil
}

// ListUndrained returns every promotion whose Drained flag is false, ordered by id.
func (s *Store) ListUndrained(ctx context.Context) ([]store.Promotion, error) {
	ps, err := s.queryPromotions(ctx, `SELECT `+sqlstore.PromotionCols+` FROM promotions WHERE NOT drained ORDER BY id`)
	if err != nil {
		return nil, wrapErr("list undrained promotions", err)
	}
	return ps, nil
}

// ClosePromotion sets ClosedAt (if not yet set) and returns the promotion;
// ErrNotFound if absent. Closing twice keeps the first time.
func (s *Store) ClosePromotion(ctx context.Context, id string, at time.Time) (store.Promotion, error) {
	p, err := scanPromotion(s.pool.QueryRow(ctx,
		`UPDATE promotions SET closed_at = COALESCE(closed_at, $2) WHERE id = $1 RETURNING `+sqlstore.PromotionCols,
		id, pgTime(at)))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Promotion{}, fmt.Errorf("postgres: close promotion %s: %w", id, store.ErrNotFound)
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
		return s.setDrained(ctx, id,
			`UPDATE promotions SET drained = true, drained_at = COALESCE(drained_at, now()) WHERE id = $1`, id)
	}
	err := s.setDrained(ctx, id, `UPDATE promotions SET drained = false, drained_at = NULL WHERE id = $1 AND retired_at IS NULL`, id)
	if errors.Is(err, store.ErrNotFound) {
		if _, gerr := s.GetPromotion(ctx, id); gerr == nil {
			return fmt.Errorf("postgres: set undrained %s: %w", id, store.ErrRetired)
		}
	}
	return err
}

// MarkDrained marks the promotion drained at at, keeping an earlier
// DrainedAt; ErrNotFound if absent.
func (s *Store) MarkDrained(ctx context.Context, id string, at time.Time) error {
	return s.setDrained(ctx, id,
		`UPDATE promotions SET drained = true, drained_at = COALESCE(drained_at, $2) WHERE id = $1`, id, pgTime(at))
}

func (s *Store) setDrained(ctx context.Context, id, query string, args ...any) error {
	tag, err := s.pool.Exec(ctx, query, args...)
	if err != nil {
		return wrapErr("set drained "+id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: set drained %s: %w", id, store.ErrNotFound)
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
	ps, err := s.queryPromotions(ctx, `SELECT `+sqlstore.PromotionCols+` FROM promotions
		WHERE drained AND drained_at <= $1 AND (retired_at IS NULL OR retired_at >= $2)
		ORDER BY retired_at IS NOT NULL, drained_at, id LIMIT $3`, pgTime(drainedBefore), pgTime(retiredSince), limit)
	if err != nil {
		return nil, wrapErr("list retirable promotions", err)
	}
	return ps, nil
}

// RetirePromotion marks the drained promotion retired at at (keeping an
// earlier time) and returns it; ErrNotRetirable if it is not drained,
// ErrNotFound if absent.
func (s *Store) RetirePromotion(ctx context.Context, id string, at time.Time) (store.Promotion, error) {
	p, err := scanPromotion(s.pool.QueryRow(ctx,
		`UPDATE promotions SET retired_at = COALESCE(retired_at, $2) WHERE id = $1 AND drained RETURNING `+sqlstore.PromotionCols,
		id, pgTime(at)))
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := s.GetPromotion(ctx, id); gerr != nil {
			return store.Promotion{}, gerr
		}
		return store.Promotion{}, fmt.Errorf("postgres: retire promotion %s: %w", id, store.ErrNotRetirable)
	}
	if err != nil {
		return store.Promotion{}, wrapErr("retire promotion "+id, err)
	}
	return p, nil
}
