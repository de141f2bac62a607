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

// ListPromotionsBy returns up to q.Limit promotions matching q, in q's
// order, after its cursor.
func (s *Store) ListPromotionsBy(ctx context.Context, q store.PromotionQuery) ([]store.Promotion, error) {
	if q.Limit <= 0 {
		return nil, nil
	}
	query, args, err := sqlstore.PromotionQuery(q, func(int) string { return "?" },
		func(t time.Time) any { return fmtTime(t) })
	if err != nil {
		return nil, fmt.Errorf("sqlite: list promotions: %w", err)
	}
	ps, err := queryPromotions(ctx, s.r, query, args...)
	if err != nil {
		return nil, wrapErr("list promotions", err)
	}
	return ps, nil
}

// ArchivePromotion sets ArchivedAt (if not yet set) and returns the
// promotion; ErrNotFound if absent.
func (s *Store) ArchivePromotion(ctx context.Context, id string, at time.Time) (store.Promotion, error) {
	p, err := scanPromotion(s.w.QueryRowContext(ctx,
		`UPDATE promotions SET archived_at = COALESCE(archived_at, ?) WHERE id = ? RETURNING `+sqlstore.PromotionCols,
		fmtTime(at), id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Promotion{}, fmt.Errorf("sqlite: archive promotion %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Promotion{}, wrapErr("archive promotion "+id, err)
	}
	return p, nil
}

// AppendAudit records one admin action.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO audit_log (at, actor, action, promotion_id, detail, status)
		VALUES (?, ?, ?, ?, ?, ?)`, fmtTime(e.At), e.Actor, e.Action, e.PromotionID, sqlstore.AuditDetail(e.Detail), e.Status)
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
	rows, err := s.r.QueryContext(ctx, `SELECT id, at, actor, action, promotion_id, detail, status
		FROM audit_log WHERE id < ? ORDER BY id DESC LIMIT ?`, beforeID, limit)
	if err != nil {
		return nil, wrapErr("list audit", err)
	}
	defer rows.Close()
	out, err := sqlstore.Collect(rows, func(row sqlstore.Scanner) (store.AuditEntry, error) {
		return sqlstore.ScanAudit(row, liteTimes)
	})
	return out, wrapErr("list audit", err)
}

// CreateAdminToken stores a token by name and SHA-256; ErrAlreadyExists if
// the name (or the hash) is taken.
func (s *Store) CreateAdminToken(ctx context.Context, t store.AdminToken) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = time.Now()
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO admin_tokens (name, sha256, created_at, created_by)
		VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, t.Name, t.SHA256, fmtTime(t.CreatedAt), t.CreatedBy)
	if err != nil {
		return wrapErr("create admin token "+t.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return wrapErr("create admin token "+t.Name, err)
	} else if n == 0 {
		return fmt.Errorf("sqlite: create admin token %s: %w", t.Name, store.ErrAlreadyExists)
	}
	return nil
}

const adminTokenCols = `name, sha256, created_at, created_by`

func scanAdminToken(row sqlstore.Scanner) (store.AdminToken, error) {
	return sqlstore.ScanAdminToken(row, liteTimes)
}

// ListAdminTokens returns every stored token, by name.
func (s *Store) ListAdminTokens(ctx context.Context) ([]store.AdminToken, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+adminTokenCols+` FROM admin_tokens ORDER BY name`)
	if err != nil {
		return nil, wrapErr("list admin tokens", err)
	}
	defer rows.Close()
	out, err := sqlstore.Collect(rows, scanAdminToken)
	return out, wrapErr("list admin tokens", err)
}

// AdminTokenByHash returns the token with this SHA-256 (hex), or
// ErrNotFound.
func (s *Store) AdminTokenByHash(ctx context.Context, sha256Hex string) (store.AdminToken, error) {
	t, err := scanAdminToken(s.r.QueryRowContext(ctx, `SELECT `+adminTokenCols+` FROM admin_tokens WHERE sha256 = ?`, sha256Hex))
	if errors.Is(err, sql.ErrNoRows) {
		return store.AdminToken{}, fmt.Errorf("sqlite: admin token: %w", store.ErrNotFound)
	}
	return t, wrapErr("admin token", err)
}

// DeleteAdminToken removes the named token; ErrNotFound if absent.
func (s *Store) DeleteAdminToken(ctx context.Context, name string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM admin_tokens WHERE name = ?`, name)
	if err != nil {
		return wrapErr("delete admin token "+name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return wrapErr("delete admin token "+name, err)
	} else if n == 0 {
		return fmt.Errorf("sqlite: delete admin token %s: %w", name, store.ErrNotFound)
	}
	return nil
}

// EraseUser replaces every stored id of userID by erasedID in one
// transaction (see store.Admin). The user's events are found by the
// user_id in their data, one scan of the events table.
func (s *Store) EraseUser(ctx context.Context, userID, erasedID string) (store.Erased, error) {
	var n store.Erased
	err := s.inTx(ctx, func(tx *sql.Tx) (err error) {
		n = store.Erased{}
		if n.Issued, err = eraseIssued(ctx, tx, userID, erasedID); err != nil {
			return err
		}
		if n.DeadLetters, err = eraseDeadLetters(ctx, tx, userID, erasedID); err != nil {
			return err
		}
		n.Events, err = s.eraseEvents(ctx, tx, userID, erasedID)
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
func eraseIssued(ctx context.Context, tx *sql.Tx, userID, erasedID string) (int64, error) {
	var cids, pids []string
	rows, err := tx.QueryContext(ctx, `SELECT claim_id, promotion_id FROM issued WHERE user_id = ?`, userID)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var c, p string
		if err := rows.Scan(&c, &p); err != nil {
			_ = rows.Close()
			return 0, err
		}
		cids, pids = append(cids, c), append(pids, p)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	var n int64
	for _, e := range sqlstore.EraseIssued(cids, pids, userID, erasedID) {
		if _, err := tx.ExecContext(ctx, `UPDATE issued SET user_id = ?, claim_id = ? WHERE claim_id = ?`,
			erasedID, e.NewClaimID, e.ClaimID); err != nil {
			return 0, err
		}
		// What the claim received follows its claim id.
		if _, err := tx.ExecContext(ctx, `UPDATE codes SET claim_id = ? WHERE claim_id = ?`, e.NewClaimID, e.ClaimID); err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE ledger SET claim_id = ? WHERE claim_id = ?`, e.NewClaimID, e.ClaimID); err != nil {
			return 0, err
		}
		n++
	}
	if _, err := tx.ExecContext(ctx, `UPDATE ledger SET user_id = ? WHERE user_id = ?`, erasedID, userID); err != nil {
		return 0, err
	}
	return n, nil
}

// eraseDeadLetters renames userID's dead letters inside tx and returns how
// many it renamed.
func eraseDeadLetters(ctx context.Context, tx *sql.Tx, userID, erasedID string) (int64, error) {
	var dead []sqlstore.ErasedRow
	rows, err := tx.QueryContext(ctx, `SELECT claim_id, promotion_id, fields FROM dead_letters WHERE user_id = ?`, userID)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var c, p, f string
		if err := rows.Scan(&c, &p, &f); err != nil {
			_ = rows.Close()
			return 0, err
		}
		e, err := sqlstore.EraseDeadLetter(c, p, f, userID, erasedID)
		if err != nil {
			_ = rows.Close()
			return 0, fmt.Errorf("dead letter %s: %w", c, err)
		}
		dead = append(dead, e)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	var n int64
	for _, e := range dead {
		if _, err := tx.ExecContext(ctx, `UPDATE dead_letters SET user_id = ?, claim_id = ?, fields = ? WHERE claim_id = ?`,
			erasedID, e.NewClaimID, e.Fields, e.ClaimID); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// eraseEvents rewrites userID's claim events inside tx and returns how many
// it rewrote.
func (s *Store) eraseEvents(ctx context.Context, tx *sql.Tx, userID, erasedID string) (int64, error) {
	evs, err := s.userEvents(ctx, tx, userID, erasedID)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range evs {
		if _, err := tx.ExecContext(ctx, `UPDATE events SET id = ?, claim_id = ?, data = ? WHERE seq = ?`,
			e.ID, e.NewClaimID, e.Data, e.Seq); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// userEvents returns the rewrites of userID's claim events (see
// sqlstore.EraseEvent), read inside tx.
func (s *Store) userEvents(ctx context.Context, tx *sql.Tx, userID, erasedID string) ([]sqlstore.ErasedEvent, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+sqlstore.ErasableEventCols("data")+` FROM events
		WHERE claim_id IS NOT NULL AND data ->> 'user_id' = ?`, userID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlstore.Collect(rows, func(row sqlstore.Scanner) (sqlstore.ErasedEvent, error) {
		return sqlstore.ScanErasedEvent(row, userID, erasedID)
	})
}
