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

// ListPromotionsBy returns up to q.Limit promotions matching q, in q's
// order, after its cursor.
func (s *Store) ListPromotionsBy(ctx context.Context, q store.PromotionQuery) ([]store.Promotion, error) {
	if q.Limit <= 0 {
		return nil, nil
	}
	query, args, err := sqlstore.PromotionQuery(q, func(n int) string { return "$" + strconv.Itoa(n) },
		func(t time.Time) any { return pgTime(t) })
	if err != nil {
		return nil, fmt.Errorf("postgres: list promotions: %w", err)
	}
	ps, err := s.queryPromotions(ctx, query, args...)
	if err != nil {
		return nil, wrapErr("list promotions", err)
	}
	return ps, nil
}

// ArchivePromotion sets ArchivedAt (if not yet set) and returns the
// promotion; ErrNotFound if absent.
func (s *Store) ArchivePromotion(ctx context.Context, id string, at time.Time) (store.Promotion, error) {
	p, err := scanPromotion(s.pool.QueryRow(ctx,
		`UPDATE promotions SET archived_at = COALESCE(archived_at, $2) WHERE id = $1 RETURNING `+sqlstore.PromotionCols,
		id, pgTime(at)))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Promotion{}, fmt.Errorf("postgres: archive promotion %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Promotion{}, wrapErr("archive promotion "+id, err)
	}
	return p, nil
}

// AppendAudit records one admin action.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO audit_log (at, actor, action, promotion_id, detail, status)
		VALUES (COALESCE($1, now()), $2, $3, $4, $5, $6)`,
		pgNullTime(e.At), e.Actor, e.Action, e.PromotionID, sqlstore.AuditDetail(e.Detail), e.Status)
	return wrapErr("append audit", err)
}

// ListAudit returns up to limit entries with ID < beforeID (all when
// beforeID <= 0), newest first.
func (s *Store) ListAudit(ctx context.Context, beforeID int64, limit int) ([]store.AuditEntry, error) {
	if limit <= 0 {
		return nil, nil
	}
	if beforeID <= 0 {
		beforeID = 1<<63 - 1
	}
	rows, err := s.pool.Query(ctx, `SELECT id, at, actor, action, promotion_id, detail::text, status
		FROM audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2`, beforeID, limit)
	if err != nil {
		return nil, wrapErr("list audit", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.AuditEntry, error) {
		return sqlstore.ScanAudit(row, pgTimes)
	})
	return out, wrapErr("list audit", err)
}

// CreateAdminToken stores a token by name and SHA-256; ErrAlreadyExists if
// the name (or the hash) is taken.
func (s *Store) CreateAdminToken(ctx context.Context, t store.AdminToken) error {
	tag, err := s.pool.Exec(ctx, `INSERT INTO admin_tokens (name, sha256, created_at, created_by)
		VALUES ($1, $2, COALESCE($3, now()), $4) ON CONFLICT DO NOTHING`, t.Name, t.SHA256, pgNullTime(t.CreatedAt), t.CreatedBy)
	if err != nil {
		return wrapErr("create admin token "+t.Name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: create admin token %s: %w", t.Name, store.ErrAlreadyExists)
	}
	return nil
}

const adminTokenCols = `name, sha256, created_at, created_by`

func scanAdminToken(row pgx.Row) (store.AdminToken, error) {
	return sqlstore.ScanAdminToken(row, pgTimes)
}

// ListAdminTokens returns every stored token, by name.
func (s *Store) ListAdminTokens(ctx context.Context) ([]store.AdminToken, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+adminTokenCols+` FROM admin_tokens ORDER BY name`)
	if err != nil {
		return nil, wrapErr("list admin tokens", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.AdminToken, error) {
		return scanAdminToken(row)
	})
	return out, wrapErr("list admin tokens", err)
}

// AdminTokenByHash returns the token with this SHA-256 (hex), or
// ErrNotFound.
func (s *Store) AdminTokenByHash(ctx context.Context, sha256Hex string) (store.AdminToken, error) {
	t, err := scanAdminToken(s.pool.QueryRow(ctx, `SELECT `+adminTokenCols+` FROM admin_tokens WHERE sha256 = $1`, sha256Hex))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.AdminToken{}, fmt.Errorf("postgres: admin token: %w", store.ErrNotFound)
	}
	return t, wrapErr("admin token", err)
}

// DeleteAdminToken removes the named token; ErrNotFound if absent.
func (s *Store) DeleteAdminToken(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM admin_tokens WHERE name = $1`, name)
	if err != nil {
		return wrapErr("delete admin token "+name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: delete admin token %s: %w", name, store.ErrNotFound)
	}
	return nil
}

// EraseUser replaces every stored id of userID by erasedID in one
// transaction (see store.Admin). The rows are locked as they are read, so
// a concurrent erase of the same user waits and then finds nothing left.
// The user's events are found by the user_id in their data, one scan of
// the events table.
func (s *Store) EraseUser(ctx context.Context, userID, erasedID string) (store.Erased, error) {
	var n store.Erased
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		n = store.Erased{}
		if n.Issued, err = eraseIssued(ctx, tx, userID, erasedID); err != nil {
			return err
		}
		if n.DeadLetters, err = eraseDeadLetters(ctx, tx, userID, erasedID); err != nil {
			return err
		}
		n.Events, err = eraseEvents(ctx, tx, userID, erasedID)
		return err
	})
	if err != nil {
		return store.Erased{}, wrapErr("erase user", err)
	}
	return n, nil
}

// eraseIssued renames userID's issued claims, with what they received
// (codes, ledger entries) and the user's ledger, inside tx; it returns how
// many claims it renamed.
func eraseIssued(ctx context.Context, tx pgx.Tx, userID, erasedID string) (int64, error) {
	rows, err := tx.Query(ctx, `SELECT claim_id, promotion_id FROM issued WHERE user_id = $1 FOR UPDATE`, userID)
	if err != nil {
		return 0, err
	}
	type ids struct{ claim, promotion string }
	issued, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ids, error) {
		var r ids
		return r, row.Scan(&r.claim, &r.promotion)
	})
	if err != nil {
		return 0, err
	}
	cids, pids := make([]string, len(issued)), make([]string, len(issued))
	for i, r := range issued {
		cids[i], pids[i] = r.claim, r.promotion
	}
	var n int64
	for _, e := range sqlstore.EraseIssued(cids, pids, userID, erasedID) {
		if _, err := tx.Exec(ctx, `UPDATE issued SET user_id = $1, claim_id = $2 WHERE claim_id = $3`,
			erasedID, e.NewClaimID, e.ClaimID); err != nil {
			return 0, err
		}
		// What the claim received follows its claim id.
		if _, err := tx.Exec(ctx, `UPDATE codes SET claim_id = $1 WHERE claim_id = $2`, e.NewClaimID, e.ClaimID); err != nil {
			return 0, err
		}
		if _, err := tx.Exec(ctx, `UPDATE ledger SET claim_id = $1 WHERE claim_id = $2`, e.NewClaimID, e.ClaimID); err != nil {
			return 0, err
		}
		n++
	}
	if _, err := tx.Exec(ctx, `UPDATE ledger SET user_id = $1 WHERE user_id = $2`, erasedID, userID); err != nil {
		return 0, err
	}
	return n, nil
}

// eraseDeadLetters renames userID's dead letters inside tx and returns how
// many it renamed.
func eraseDeadLetters(ctx context.Context, tx pgx.Tx, userID, erasedID string) (int64, error) {
	rows, err := tx.Query(ctx, `SELECT claim_id, promotion_id, fields::text FROM dead_letters WHERE user_id = $1 FOR UPDATE`, userID)
	if err != nil {
		return 0, err
	}
	dead, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sqlstore.ErasedRow, error) {
		var c, p, f string
		if err := row.Scan(&c, &p, &f); err != nil {
			return sqlstore.ErasedRow{}, err
		}
		return sqlstore.EraseDeadLetter(c, p, f, userID, erasedID)
	})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range dead {
		if _, err := tx.Exec(ctx, `UPDATE dead_letters SET user_id = $1, claim_id = $2, fields = $3::jsonb WHERE claim_id = $4`,
			erasedID, e.NewClaimID, e.Fields, e.ClaimID); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// eraseEvents rewrites userID's claim events inside tx and returns how many
// it rewrote.
func eraseEvents(ctx context.Context, tx pgx.Tx, userID, erasedID string) (int64, error) {
	rows, err := tx.Query(ctx, `SELECT `+sqlstore.ErasableEventCols("data::text")+` FROM events
		WHERE claim_id IS NOT NULL AND data ->> 'user_id' = $1 FOR UPDATE`, userID)
	if err != nil {
		return 0, err
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sqlstore.ErasedEvent, error) {
		return sqlstore.ScanErasedEvent(row, userID, erasedID)
	})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range evs {
		if _, err := tx.Exec(ctx, `UPDATE events SET id = $1, claim_id = $2, data = $3::jsonb WHERE seq = $4`,
			e.ID, e.NewClaimID, e.Data, e.Seq); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}
