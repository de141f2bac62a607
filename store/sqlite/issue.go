package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dibsio/dibs/store"
)

// insertChunk is how many rows one INSERT carries. Each row binds
// issueCols variables; SQLite allows 32766 per statement, so 1000 rows
// stay far below the limit while keeping statements short.
const (
	insertChunk = 1000
	issueCols   = 7
)

// issueKey is what makes two issues "the same claim": a redelivery carries
// the same claim id, promotion, user, rank and slot.
type issueKey struct {
	claimID, promotionID, userID string
	rank                         int64
	slot                         int
}

func keyOf(is store.Issue) issueKey {
	return issueKey{is.ClaimID, is.PromotionID, is.UserID, is.Rank, is.Slot}
}

// issueTx inserts issues inside tx and classifies each one.
func issueTx(ctx context.Context, tx *sql.Tx, issues []store.Issue, now time.Time) ([]store.Outcome, error) {
	out := make([]store.Outcome, len(issues))
	// pending maps each distinct content to the indexes carrying it, in
	// order: when a batch holds the same claim twice, the first is the one
	// inserted and the second is a duplicate of it.
	pending := make(map[issueKey][]int, len(issues))
	for i, is := range issues {
		k := keyOf(is)
		pending[k] = append(pending[k], i)
	}
	issuedAt := fmtTime(now)
	var b strings.Builder
	args := make([]any, 0, min(len(issues), insertChunk)*issueCols)
	for start := 0; start < len(issues); start += insertChunk {
		chunk := issues[start:min(start+insertChunk, len(issues))]
		b.Reset()
		args = args[:0]
		b.WriteString(`INSERT INTO issued (claim_id, promotion_id, user_id, rank, slot, accepted_at, issued_at) VALUES `)
		for i, is := range chunk {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`(?,?,?,?,?,?,?)`)
			args = append(args, is.ClaimID, is.PromotionID, is.UserID, is.Rank, is.Slot, fmtTime(is.AcceptedAt), issuedAt)
		}
		b.WriteString(` ON CONFLICT DO NOTHING RETURNING claim_id, promotion_id, user_id, rank, slot`)
		if err := scanKeys(ctx, tx, b.String(), args, func(k issueKey) error {
			idx := pending[k]
			if len(idx) == 0 {
				return fmt.Errorf("insert returned claim %s that was not in the batch", k.claimID)
			}
			out[idx[0]] = store.Inserted
			pending[k] = idx[1:]
			return nil
		}); err != nil {
			return nil, err
		}
	}

	// Every issue not inserted hit a unique key. It is a duplicate only if
	// the row stored under its claim id has the same content.
	var rest []string
	for i, o := range out {
		if o == 0 {
			rest = append(rest, issues[i].ClaimID)
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	ids, err := json.Marshal(rest)
	if err != nil {
		return nil, err
	}
	stored := make(map[string]issueKey, len(rest))
	if err := scanKeys(ctx, tx,
		`SELECT claim_id, promotion_id, user_id, rank, slot FROM issued
		 WHERE claim_id IN (SELECT value FROM json_each(?))`,
		[]any{string(ids)}, func(k issueKey) error {
			stored[k.claimID] = k
			return nil
		}); err != nil {
		return nil, err
	}
	for i, o := range out {
		if o != 0 {
			continue
		}
		if k, ok := stored[issues[i].ClaimID]; ok && k == keyOf(issues[i]) {
			out[i] = store.Duplicate
		} else {
			out[i] = store.Conflict
		}
	}
	return out, nil
}

// scanKeys runs a query returning (claim_id, promotion_id, user_id, rank,
// slot) rows and hands each to fn.
func scanKeys(ctx context.Context, tx *sql.Tx, query string, args []any, fn func(issueKey) error) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k issueKey
		if err := rows.Scan(&k.claimID, &k.promotionID, &k.userID, &k.rank, &k.slot); err != nil {
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
	var out []store.Issued
	for rows.Next() {
		var (
			is               store.Issued
			accepted, issued string
		)
		if err := rows.Scan(&is.ClaimID, &is.PromotionID, &is.UserID, &is.Rank, &is.Slot, &accepted, &issued); err != nil {
			return nil, wrapErr("list issued", err)
		}
		if is.AcceptedAt, err = parseTime(accepted); err != nil {
			return nil, wrapErr("list issued", err)
		}
		if is.IssuedAt, err = parseTime(issued); err != nil {
			return nil, wrapErr("list issued", err)
		}
		out = append(out, is)
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr("list issued", err)
	}
	return out, nil
}

// Counts returns the promotion's database-side counts (zero for an unknown
// promotion).
func (s *Store) Counts(ctx context.Context, promotionID string) (store.Counts, error) {
	var c store.Counts
	err := s.r.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM issued WHERE promotion_id = ?1),
		(SELECT count(*) FROM dead_letters WHERE promotion_id = ?1 AND state = 'failed'),
		(SELECT count(*) FROM dead_letters WHERE promotion_id = ?1 AND state = 'voided')`,
		promotionID).Scan(&c.Issued, &c.Failed, &c.Voided)
	if err != nil {
		return store.Counts{}, wrapErr("counts "+promotionID, err)
	}
	return c, nil
}
