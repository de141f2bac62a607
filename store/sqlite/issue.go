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
// classifies each one.
func issueTx(ctx context.Context, tx *sql.Tx, ins *insertStmts, issues []store.Issue, now time.Time) ([]store.Outcome, error) {
	outcomes := sqlstore.NewOutcomes(issues)
	issuedAt := fmtTime(now)
	args := make([]any, 0, insertRows(len(issues))*issueCols)
	for start := 0; start < len(issues); {
		piece := issues[start : start+insertRows(len(issues)-start)]
		start += len(piece)
		args = args[:0]
		for _, is := range piece {
			args = append(args, is.ClaimID, is.PromotionID, is.UserID, is.Rank, is.Slot, fmtTime(is.AcceptedAt), issuedAt)
		}
		rows, err := ins.query(ctx, tx, len(piece), args)
		if err != nil {
			return nil, err
		}
		if err := scanKeys(rows, outcomes.Inserted); err != nil {
			return nil, err
		}
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
	rows, err := s.r.QueryContext(ctx, `SELECT claim_id, promotion_id, user_id, rank, slot, accepted_at, issued_at
		FROM issued WHERE promotion_id = ? AND user_id = ? ORDER BY slot`, promotionID, userID)
	if err != nil {
		return nil, wrapErr("list issued", err)
	}
	defer rows.Close()
	out, err := sqlstore.Collect(rows, func(row sqlstore.Scanner) (store.Issued, error) {
		return sqlstore.ScanIssued(row, liteTimes)
	})
	if err != nil {
		return nil, wrapErr("list issued", err)
	}
	return out, nil
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
			AND NOT EXISTS (SELECT 1 FROM issued i WHERE i.promotion_id = d.promotion_id AND i.rank = d.rank))`,
		promotionID).Scan(&c.Issued, &c.Failed, &c.Voided)
	if err != nil {
		return store.Counts{}, wrapErr("counts "+promotionID, err)
	}
	return c, nil
}
