package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

const deadLetterCols = `claim_id, promotion_id, user_id, rank, slot, reason, deliveries, state, at, fields`

func scanDeadLetter(row sqlstore.Scanner) (store.DeadLetter, error) {
	return sqlstore.ScanDeadLetter(row, liteTimes)
}

// RecordDeadLetter inserts the dead letter in state DeadFailed, or, if the
// claim is already recorded, updates reason, deliveries, time and fields and
// sets the state back to DeadFailed, with nothing left to apply (a new row is
// applied by the column's default). A claim already voided is left as it is.
// If the dead letter or issued row under the claim id holds another claim, it
// writes nothing and returns an error wrapping store.ErrClaimMismatch. The
// check and the write are one transaction of the one writer.
func (s *Store) RecordDeadLetter(ctx context.Context, d store.DeadLetter) error {
	fields, err := sqlstore.EncodeFields(d.Fields)
	if err != nil {
		return fmt.Errorf("sqlite: record dead letter %s: %w", d.ClaimID, err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, sqlstore.StoredClaimsSQL("?1"), d.ClaimID)
		if err != nil {
			return err
		}
		err = sqlstore.CheckSameClaim(d, rows)
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		ev, write, err := failedEvent(ctx, tx, d)
		if err != nil {
			return err
		}
		if write {
			if err := writeEvents(ctx, tx, []store.Event{ev}); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO dead_letters (`+deadLetterCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'failed', ?, ?)
			ON CONFLICT (claim_id) DO UPDATE SET
				reason = excluded.reason,
				deliveries = excluded.deliveries,
				at = excluded.at,
				fields = excluded.fields,
				state = 'failed',
				applied = 1
			WHERE dead_letters.state <> 'voided'`,
			d.ClaimID, d.PromotionID, d.UserID, d.Rank, d.Slot, d.Reason, d.Deliveries, fmtTime(d.At), fields)
		return err
	})
	return wrapErr("record dead letter "+d.ClaimID, err)
}

// failedEvent returns the claim.failed event of d, and whether recording d
// in tx makes it a failure of its own: the claim is new to dead_letters, or
// it failed again after a replay. A failure recorded again, or a voided
// claim, writes none.
func failedEvent(ctx context.Context, tx *sql.Tx, d store.DeadLetter) (store.Event, bool, error) {
	var (
		state string
		moved sql.NullString
	)
	err := tx.QueryRowContext(ctx, `SELECT state, moved_at FROM dead_letters WHERE claim_id = ?`, d.ClaimID).Scan(&state, &moved)
	var replayedAt time.Time
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return store.Event{}, false, err
	case state != store.DeadReplayed:
		return store.Event{}, false, nil
	default:
		if replayedAt, err = parseNullTime(moved); err != nil {
			return store.Event{}, false, err
		}
	}
	ev, err := sqlstore.FailedEvent(d, replayedAt)
	return ev, err == nil, err
}

// ListDeadLetters returns up to limit dead letters of the promotion in state
// DeadFailed with claim_id > after, ordered by claim_id. A limit of zero or
// less returns none.
func (s *Store) ListDeadLetters(ctx context.Context, promotionID, after string, limit int) ([]store.DeadLetter, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+deadLetterCols+` FROM dead_letters
		WHERE promotion_id = ? AND state = 'failed' AND claim_id > ?
		ORDER BY claim_id LIMIT ?`, promotionID, after, limit)
	if err != nil {
		return nil, wrapErr("list dead letters", err)
	}
	out, err := collectDeadLetters(rows)
	if err != nil {
		return nil, wrapErr("list dead letters", err)
	}
	return out, nil
}

// TransitionDeadLetters moves the named claims (all failed ones of the
// promotion if claimIDs is nil) from DeadFailed to `to` (DeadReplayed or
// DeadVoided) in one UPDATE ... RETURNING, marking them moved now and not
// applied, and returns the moved dead letters ordered by claim_id. A void
// skips claims that have an issued row, and writes a claim.voided event of
// each claim it voids in the same transaction. The one writer serialises
// concurrent calls (and IssueBatch) and the state = 'failed' condition skips
// claims already moved, so a claim is moved once in total.
func (s *Store) TransitionDeadLetters(ctx context.Context, promotionID string, claimIDs []string, to string) ([]store.DeadLetter, error) {
	if err := sqlstore.CheckTransitionTarget(to); err != nil {
		return nil, fmt.Errorf("sqlite: transition dead letters: %w", err)
	}
	if claimIDs != nil && len(claimIDs) == 0 {
		return nil, nil
	}
	var ids any // NULL selects every failed claim of the promotion
	if claimIDs != nil {
		b, err := json.Marshal(claimIDs)
		if err != nil {
			return nil, fmt.Errorf("sqlite: transition dead letters: %w", err)
		}
		ids = string(b)
	}
	skipIssued := ""
	if to == store.DeadVoided {
		// An issued claim already took its unit; voiding would return it.
		skipIssued = `AND NOT EXISTS (SELECT 1 FROM issued WHERE issued.claim_id = dead_letters.claim_id)`
	}
	now := time.Now()
	var out []store.DeadLetter
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE dead_letters SET state = ?1, applied = 0, moved_at = ?4
			WHERE promotion_id = ?2 AND state = 'failed'
			  AND (?3 IS NULL OR claim_id IN (SELECT value FROM json_each(?3)))
			  `+skipIssued+`
			RETURNING `+deadLetterCols, to, promotionID, ids, fmtTime(now))
		if err != nil {
			return err
		}
		if out, err = collectDeadLetters(rows); err != nil {
			return err
		}
		sqlstore.SortByClaimID(out)
		if to != store.DeadVoided {
			return nil
		}
		evs, err := sqlstore.VoidEvents(out, now)
		if err != nil {
			return err
		}
		return writeEvents(ctx, tx, evs)
	})
	if err != nil {
		return nil, wrapErr("transition dead letters", err)
	}
	return out, nil
}

// MarkDeadLettersApplied records that the Redis side effect of the named
// claims' last transition was done. Unknown claims are ignored.
func (s *Store) MarkDeadLettersApplied(ctx context.Context, state string, claimIDs []string) error {
	if len(claimIDs) == 0 {
		return nil
	}
	b, err := json.Marshal(claimIDs)
	if err != nil {
		return fmt.Errorf("sqlite: mark dead letters applied: %w", err)
	}
	_, err = s.w.ExecContext(ctx, `UPDATE dead_letters SET applied = 1
		WHERE applied = 0 AND state = ? AND claim_id IN (SELECT value FROM json_each(?))`, state, string(b))
	return wrapErr("mark dead letters applied", err)
}

// ListUnappliedDeadLetters returns up to limit replayed or voided dead
// letters, of any promotion, not yet applied and moved before movedBefore,
// oldest move first (ties by claim_id), from the dead_letters_unapplied
// index. A limit of zero or less returns none.
func (s *Store) ListUnappliedDeadLetters(ctx context.Context, movedBefore time.Time, limit int) ([]store.DeadLetter, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+deadLetterCols+` FROM dead_letters
		WHERE applied = 0 AND state IN ('replayed', 'voided') AND moved_at < ?
		ORDER BY moved_at, claim_id LIMIT ?`, fmtTime(movedBefore), limit)
	if err != nil {
		return nil, wrapErr("list unapplied dead letters", err)
	}
	out, err := collectDeadLetters(rows)
	if err != nil {
		return nil, wrapErr("list unapplied dead letters", err)
	}
	return out, nil
}

// collectDeadLetters scans every row and closes rows.
func collectDeadLetters(rows *sql.Rows) ([]store.DeadLetter, error) {
	defer rows.Close()
	return sqlstore.Collect(rows, scanDeadLetter)
}
