package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

// deadLetterCols is the column list every dead-letter query selects, in the
// order scanDeadLetter reads. fields goes out as text and is decoded here.
const deadLetterCols = `claim_id, promotion_id, user_id, rank, slot, reason, deliveries, state, at, fields::text`

func scanDeadLetter(row pgx.CollectableRow) (store.DeadLetter, error) {
	return sqlstore.ScanDeadLetter(row, pgTimes)
}

// RecordDeadLetter inserts the dead letter in state DeadFailed, or, if the
// claim is already recorded, updates reason, deliveries, time and fields and
// sets the state back to DeadFailed, with nothing left to apply (a new row is
// applied by the column's default). A claim already voided is left as it is.
func (s *Store) RecordDeadLetter(ctx context.Context, d store.DeadLetter) error {
	fields, err := sqlstore.EncodeFields(d.Fields)
	if err != nil {
		return fmt.Errorf("postgres: record dead letter %s: %w", d.ClaimID, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO dead_letters
			(claim_id, promotion_id, user_id, rank, slot, reason, deliveries, state, at, fields)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'failed', $8, CAST($9::text AS jsonb))
		ON CONFLICT (claim_id) DO UPDATE SET
			reason = EXCLUDED.reason,
			deliveries = EXCLUDED.deliveries,
			at = EXCLUDED.at,
			fields = EXCLUDED.fields,
			state = 'failed',
			applied = true
		WHERE dead_letters.state <> 'voided'`,
		d.ClaimID, d.PromotionID, d.UserID, d.Rank, d.Slot, d.Reason, d.Deliveries, pgTime(d.At), fields)
	return wrapErr("record dead letter "+d.ClaimID, err)
}

// ListDeadLetters returns up to limit dead letters of the promotion in state
// DeadFailed with claim_id > after, ordered by claim_id. A limit of zero or
// less returns none.
func (s *Store) ListDeadLetters(ctx context.Context, promotionID, after string, limit int) ([]store.DeadLetter, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deadLetterCols+` FROM dead_letters
		WHERE promotion_id = $1 AND state = 'failed' AND claim_id > $2
		ORDER BY claim_id LIMIT $3`, promotionID, after, limit)
	if err != nil {
		return nil, wrapErr("list dead letters", err)
	}
	out, err := pgx.CollectRows(rows, scanDeadLetter)
	if err != nil {
		return nil, wrapErr("list dead letters", err)
	}
	return out, nil
}

// TransitionDeadLetters moves the named claims (all failed ones of the
// promotion if claimIDs is nil) from DeadFailed to `to` (DeadReplayed or
// DeadVoided) in one UPDATE ... RETURNING, marking them moved now and not
// applied, and returns the moved dead letters ordered by claim_id. A void
// skips claims that have an issued row. A concurrent call that reaches a row
// this one has just moved waits for it, re-reads the row and, its state no
// longer being failed, skips it; so a claim is moved once in total.
func (s *Store) TransitionDeadLetters(ctx context.Context, promotionID string, claimIDs []string, to string) ([]store.DeadLetter, error) {
	if err := sqlstore.CheckTransitionTarget(to); err != nil {
		return nil, fmt.Errorf("postgres: transition dead letters: %w", err)
	}
	if claimIDs != nil && len(claimIDs) == 0 {
		return nil, nil
	}
	skipIssued := ""
	if to == store.DeadVoided {
		// An issued claim already took its unit; voiding would return it.
		skipIssued = `AND NOT EXISTS (SELECT 1 FROM issued WHERE issued.claim_id = dead_letters.claim_id)`
	}
	update := `UPDATE dead_letters SET state = $3, applied = false, moved_at = $4
		WHERE promotion_id = $1 AND state = 'failed'
		  AND ($2::text[] IS NULL OR claim_id = ANY($2::text[]))
		  ` + skipIssued + `
		RETURNING ` + deadLetterCols
	args := []any{promotionID, claimIDs, to, pgTime(time.Now())}
	var out []store.DeadLetter
	var err error
	if to != store.DeadVoided {
		rows, qerr := s.pool.Query(ctx, update, args...)
		if qerr == nil {
			out, qerr = pgx.CollectRows(rows, scanDeadLetter)
		}
		err = qerr
	} else {
		// A void must not pass an issue of the same claim in flight: under
		// READ COMMITTED each statement checks the other table for rows the
		// other has not committed yet. Both lock the claim's dead-letter row
		// first (the issue FOR SHARE, the void FOR UPDATE), and the void's
		// UPDATE runs as a new statement after the lock, so it sees an issue
		// that committed meanwhile.
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT 1 FROM dead_letters
				WHERE promotion_id = $1 AND state = 'failed'
				  AND ($2::text[] IS NULL OR claim_id = ANY($2::text[]))
				ORDER BY claim_id FOR UPDATE`, promotionID, claimIDs); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, update, args...)
			if err != nil {
				return err
			}
			out, err = pgx.CollectRows(rows, scanDeadLetter)
			return err
		})
	}
	if err != nil {
		return nil, wrapErr("transition dead letters", err)
	}
	sqlstore.SortByClaimID(out)
	return out, nil
}

// MarkDeadLettersApplied records that the Redis side effect of the named
// claims' last transition was done. Unknown claims are ignored.
func (s *Store) MarkDeadLettersApplied(ctx context.Context, state string, claimIDs []string) error {
	if len(claimIDs) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `UPDATE dead_letters SET applied = true
		WHERE NOT applied AND state = $1 AND claim_id = ANY($2::text[])`, state, claimIDs)
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
	rows, err := s.pool.Query(ctx, `SELECT `+deadLetterCols+` FROM dead_letters
		WHERE NOT applied AND state IN ('replayed', 'voided') AND moved_at < $1
		ORDER BY moved_at, claim_id LIMIT $2`, pgTime(movedBefore), limit)
	if err != nil {
		return nil, wrapErr("list unapplied dead letters", err)
	}
	out, err := pgx.CollectRows(rows, scanDeadLetter)
	if err != nil {
		return nil, wrapErr("list unapplied dead letters", err)
	}
	return out, nil
}
