package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dibsio/dibs/store"
)

// promotionCols is the column list every promotion query selects, in the
// order scanPromotion reads.
const promotionCols = `id, name, mode, kind, stock, per_user_limit, value,
	starts_at, ends_at, closed_at, created_at,
	waiting_room_enabled, waiting_room_admit_per_second, waiting_room_entry_ttl_seconds,
	drained`

type scanner interface {
	Scan(dest ...any) error
}

func scanPromotion(row scanner) (store.Promotion, error) {
	var (
		p                        store.Promotion
		starts, ends, created    string
		closed                   sql.NullString
		wrEnabled, drained       bool
		wrAdmit, wrTTL, perLimit int
	)
	if err := row.Scan(&p.ID, &p.Name, &p.Mode, &p.Kind, &p.Stock, &perLimit, &p.Value,
		&starts, &ends, &closed, &created,
		&wrEnabled, &wrAdmit, &wrTTL, &drained); err != nil {
		return store.Promotion{}, err
	}
	var err error
	if p.StartsAt, err = parseTime(starts); err != nil {
		return store.Promotion{}, err
	}
	if p.EndsAt, err = parseTime(ends); err != nil {
		return store.Promotion{}, err
	}
	if p.ClosedAt, err = parseNullTime(closed); err != nil {
		return store.Promotion{}, err
	}
	if p.CreatedAt, err = parseTime(created); err != nil {
		return store.Promotion{}, err
	}
	p.PerUserLimit = perLimit
	p.WaitingRoom = store.WaitingRoom{Enabled: wrEnabled, AdmitPerSecond: wrAdmit, EntryTTLSeconds: wrTTL}
	p.Drained = drained
	return p, nil
}

func queryPromotions(ctx context.Context, db *sql.DB, query string, args ...any) ([]store.Promotion, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ps []store.Promotion
	for rows.Next() {
		p, err := scanPromotion(rows)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, rows.Err()
}

// CreatePromotion inserts p; ErrAlreadyExists if the id is taken. A zero
// CreatedAt is set to now.
func (s *Store) CreatePromotion(ctx context.Context, p store.Promotion) error {
	created := p.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO promotions (`+promotionCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`,
		p.ID, p.Name, p.Mode, p.Kind, p.Stock, p.PerUserLimit, p.Value,
		fmtTime(p.StartsAt), fmtTime(p.EndsAt), fmtNullTime(p.ClosedAt), fmtTime(created),
		p.WaitingRoom.Enabled, p.WaitingRoom.AdmitPerSecond, p.WaitingRoom.EntryTTLSeconds,
		p.Drained)
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
		`SELECT `+promotionCols+` FROM promotions WHERE id = ?`, id))
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
		`SELECT `+promotionCols+` FROM promotions WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, wrapErr("list promotions", err)
	}
	return ps, nil
}

// ListUndrained returns every promotion whose Drained flag is false, ordered by id.
func (s *Store) ListUndrained(ctx context.Context) ([]store.Promotion, error) {
	ps, err := queryPromotions(ctx, s.r,
		`SELECT `+promotionCols+` FROM promotions WHERE drained = 0 ORDER BY id`)
	if err != nil {
		return nil, wrapErr("list undrained promotions", err)
	}
	return ps, nil
}

// ClosePromotion sets ClosedAt (if not yet set) and returns the promotion;
// ErrNotFound if absent. Closing twice keeps the first time.
func (s *Store) ClosePromotion(ctx context.Context, id string, at time.Time) (store.Promotion, error) {
	p, err := scanPromotion(s.w.QueryRowContext(ctx,
		`UPDATE promotions SET closed_at = COALESCE(closed_at, ?) WHERE id = ? RETURNING `+promotionCols,
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
func (s *Store) SetDrained(ctx context.Context, id string, drained bool) error {
	res, err := s.w.ExecContext(ctx, `UPDATE promotions SET drained = ? WHERE id = ?`, drained, id)
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
