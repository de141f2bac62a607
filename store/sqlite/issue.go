package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

// issueTx inserts issues inside tx, with the prepared inserts of ins, and
// classifies each one. The inserted ones get their grants and their
// claim.accepted and claim.issued events in tx.
func issueTx(ctx context.Context, tx *sql.Tx, ins *insertStmts, issues []store.Issue, now time.Time) ([]store.Outcome, error) {
	outcomes := sqlstore.NewOutcomes(issues)
	issuedAt := fmtTime(now)
	args := make([]any, 0, insertRows(len(issues))*issueCols)
	err := pieces(len(issues), func(start, end int) error {
		args = args[:0]
		for _, is := range issues[start:end] {
			args = append(args, is.ClaimID, is.PromotionID, is.UserID, is.Rank, is.Slot, fmtTime(is.AcceptedAt), issuedAt)
		}
		rows, err := ins.query(ctx, tx, insertIssued, end-start, args)
		if err != nil {
			return err
		}
		return scanKeys(rows, outcomes.Inserted)
	})
	if err != nil {
		return nil, err
	}

	inserted := outcomes.InsertedIssues()
	if err := writeGrants(ctx, tx, ins, inserted, issuedAt); err != nil {
		return nil, err
	}
	evs, err := sqlstore.IssueEvents(inserted, now)
	if err != nil {
		return nil, err
	}
	if err := ins.writeEvents(ctx, tx, evs); err != nil {
		return nil, err
	}

	// Every issue not inserted hit a unique key. It is a duplicate only if
	// the row stored under its claim id has the same content.
	rest := outcomes.Rest()
	if len(rest) == 0 {
		return outcomes.Settle(nil), nil
	}
	ids, err := json.Marshal(rest)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT claim_id, promotion_id, user_id, rank, slot FROM issued
		 WHERE claim_id IN (SELECT value FROM json_each(?))`, string(ids))
	if err != nil {
		return nil, err
	}
	stored := make(map[string]sqlstore.IssueKey, len(rest))
	if err := scanKeys(rows, func(k sqlstore.IssueKey) error {
		stored[k.ClaimID] = k
		return nil
	}); err != nil {
		return nil, err
	}
	return outcomes.Settle(stored), nil
}

// The grant inserts. A code row whose code another claim holds is skipped
// (OR IGNORE, as insertIssued explains) and made anew (sqlstore.WriteCodes).
var (
	insertCodes = &multiInsert{text: func(n int) string {
		return valuesSQL(`INSERT OR IGNORE INTO codes (code, claim_id, promotion_id, value, expires_at) VALUES `, 5, n,
			` RETURNING claim_id`)
	}}
	insertLedger = &multiInsert{text: func(n int) string {
		return valuesSQL(`INSERT INTO ledger (claim_id, user_id, promotion_id, amount, at) VALUES `, 5, n, ``)
	}}
)

// Pool codes: whether a promotion has a pool, and taking one free code
// for a claim (the one writer makes LIMIT 1 enough: nothing else takes
// codes meanwhile).
const (
	hasPool      = `SELECT EXISTS (SELECT 1 FROM code_pool WHERE promotion_id = ?)`
	takePoolCode = `UPDATE code_pool SET claim_id = ?, value = ?, taken_at = ?
		WHERE rowid = (SELECT rowid FROM code_pool WHERE promotion_id = ? AND claim_id IS NULL LIMIT 1)`
)

// writeGrants writes the codes and ledger entries of the issues just
// inserted, inside tx.
func writeGrants(ctx context.Context, tx *sql.Tx, ins *insertStmts, inserted []store.Issue, issuedAt string) error {
	coded, err := sqlstore.TakePoolCodes(inserted, func(id string) (bool, error) {
		var ok bool
		rows, err := ins.queryText(ctx, tx, hasPool, id)
		if err != nil {
			return false, err
		}
		defer rows.Close()
		if rows.Next() {
			err = rows.Scan(&ok)
		}
		if err == nil {
			err = rows.Err()
		}
		return ok, err
	}, func(id string, issues []store.Issue) ([]string, error) {
		var served []string
		for _, is := range issues {
			res, err := tx.ExecContext(ctx, takePoolCode, is.ClaimID, is.Grant.Value, issuedAt, id)
			if err != nil {
				return nil, err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return nil, err
			}
			if n == 0 {
				break
			}
			served = append(served, is.ClaimID)
		}
		return served, nil
	})
	if err != nil {
		return err
	}
	err = sqlstore.WriteCodes(coded, func(rows []sqlstore.CodeRow) ([]string, error) {
		var written []string
		args := make([]any, 0, insertRows(len(rows))*5)
		err := pieces(len(rows), func(start, end int) error {
			args = args[:0]
			for _, r := range rows[start:end] {
				var expires any
				if t := r.Issue.Grant.ExpiresAt; !t.IsZero() {
					expires = fmtTime(t)
				}
				args = append(args, r.Code, r.Issue.ClaimID, r.Issue.PromotionID, r.Issue.Grant.Value, expires)
			}
			res, err := ins.query(ctx, tx, insertCodes, end-start, args)
			if err != nil {
				return err
			}
			defer res.Close()
			for res.Next() {
				var id string
				if err := res.Scan(&id); err != nil {
					return err
				}
				written = append(written, id)
			}
			return res.Err()
		})
		return written, err
	})
	if err != nil {
		return err
	}
	credits := sqlstore.Credits(inserted)
	args := make([]any, 0, insertRows(len(credits))*5)
	return pieces(len(credits), func(start, end int) error {
		args = args[:0]
		for _, is := range credits[start:end] {
			args = append(args, is.ClaimID, is.UserID, is.PromotionID, is.Grant.Points, issuedAt)
		}
		_, err := ins.exec(ctx, tx, insertLedger, end-start, args)
		return err
	})
}

// scanKeys hands each (claim_id, promotion_id, user_id, rank, slot) row to
// fn and closes rows.
func scanKeys(rows *sql.Rows, fn func(sqlstore.IssueKey) error) error {
	defer rows.Close()
	for rows.Next() {
		k, err := sqlstore.ScanIssueKey(rows)
		if err != nil {
			return err
		}
		if err := fn(k); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ListIssued returns the user's issued rows in the promotion, by slot.
func (s *Store) ListIssued(ctx context.Context, promotionID, userID string) ([]store.Issued, error) {
	return s.issuedRows(ctx, "list issued", `SELECT `+sqlstore.IssuedCols+` FROM `+sqlstore.IssuedFrom+`
		WHERE i.promotion_id = ? AND i.user_id = ? ORDER BY i.slot`, promotionID, userID)
}

// IssuedByRank returns up to limit issued rows of the promotion with rank >
// afterRank, ordered by rank, each with its grant.
func (s *Store) IssuedByRank(ctx context.Context, promotionID string, afterRank int64, limit int) ([]store.Issued, error) {
	return s.issuedRows(ctx, "issued by rank", `SELECT `+sqlstore.IssuedCols+` FROM `+sqlstore.IssuedFrom+`
		WHERE i.promotion_id = ? AND i.rank > ? ORDER BY i.rank LIMIT ?`, promotionID, afterRank, max(limit, 0))
}

// issuedRows runs a query of sqlstore.IssuedCols.
func (s *Store) issuedRows(ctx context.Context, op, query string, args ...any) ([]store.Issued, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	defer rows.Close()
	out, err := sqlstore.Collect(rows, func(row sqlstore.Scanner) (store.Issued, error) {
		return sqlstore.ScanIssued(row, liteTimes)
	})
	if err != nil {
		return nil, wrapErr(op, err)
	}
	return out, nil
}

// Balance returns the sum and count of the user's ledger entries.
func (s *Store) Balance(ctx context.Context, userID string) (store.Balance, error) {
	b := store.Balance{UserID: userID}
	err := s.r.QueryRowContext(ctx, `SELECT COALESCE(sum(amount), 0), count(*) FROM ledger WHERE user_id = ?`,
		userID).Scan(&b.Points, &b.Entries)
	if err != nil {
		return store.Balance{}, wrapErr("balance", err)
	}
	return b, nil
}

// Counts returns the promotion's database-side counts (zero for an unknown
// promotion). A dead letter whose rank an issued row holds (a claim that
// collided after Redis lost writes, with no stock left to re-rank it) holds
// no unit of its own and is left out of Failed and Voided.
func (s *Store) Counts(ctx context.Context, promotionID string) (store.Counts, error) {
	var c store.Counts
	err := s.r.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM issued WHERE promotion_id = ?1),
		(SELECT count(*) FROM dead_letters d WHERE d.promotion_id = ?1 AND d.state = 'failed' AND d.rank > 0
			AND NOT EXISTS (SELECT 1 FROM issued i WHERE i.promotion_id = d.promotion_id AND i.rank = d.rank)),
		(SELECT count(*) FROM dead_letters d WHERE d.promotion_id = ?1 AND d.state = 'voided' AND d.rank > 0
			AND NOT EXISTS (SELECT 1 FROM issued i WHERE i.promotion_id = d.promotion_id AND i.rank = d.rank)),
		(SELECT count(*) FROM issued WHERE promotion_id = ?1 AND revoked_at IS NOT NULL),
		(SELECT count(*) FROM issued WHERE promotion_id = ?1 AND revoked_at IS NOT NULL AND revoke_returned = 1)`,
		promotionID).Scan(&c.Issued, &c.Failed, &c.Voided, &c.Revoked, &c.RevokedReturned)
	if err != nil {
		return store.Counts{}, wrapErr("counts "+promotionID, err)
	}
	return c, nil
}
