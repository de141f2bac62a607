package postgres

import (
	"context"
	"errors"
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
// If the dead letter or issued row under the claim id holds another claim, it
// writes nothing and returns an error wrapping store.ErrClaimMismatch. The
// claim's lock, the one IssueBatch and a void take, is held throughout, so
// the rows compared are the ones the write meets.
func (s *Store) RecordDeadLetter(ctx context.Context, d store.DeadLetter) error {
	fields, err := sqlstore.EncodeFields(d.Fields)
	if err != nil {
		return fmt.Errorf("postgres: record dead letter %s: %w", d.ClaimID, err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockClaims(ctx, tx, []string{d.PromotionID}, []string{d.ClaimID}); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sqlstore.StoredClaimsSQL("$1"), d.ClaimID)
		if err != nil {
			return err
		}
		err = sqlstore.CheckSameClaim(d, rows)
		rows.Close()
		if err != nil {
			return err
		}
		var (
			state   string
			movedAt *time.Time
		)
		err = tx.QueryRow(ctx, `SELECT state, moved_at FROM dead_letters WHERE claim_id = $1`, d.ClaimID).Scan(&state, &movedAt)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// A new dead letter, or a replayed claim that failed again, is a
		// failure of its own; one recorded again, or a voided claim, is not.
		fresh := errors.Is(err, pgx.ErrNoRows) || state == store.DeadReplayed
		_, err = tx.Exec(ctx, `INSERT INTO dead_letters
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
		if err != nil || !fresh {
			return err
		}
		ev, err := sqlstore.FailedEvent(d, utc(movedAt))
		if err != nil {
			return err
		}
		_, err = writeEvents(ctx, tx, []store.Event{ev})
		return err
	})
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
	var (
		out []store.DeadLetter
		err error
	)
	if to == store.DeadVoided {
		out, err = s.void(ctx, promotionID, claimIDs)
	} else {
		out, err = collectMoved(s.pool.Query(ctx, transitionSQL(""), promotionID, claimIDs, to, pgTime(time.Now())))
	}
	if err != nil {
		return nil, wrapErr("transition dead letters", err)
	}
	sqlstore.SortByClaimID(out)
	return out, nil
}

// transitionSQL is the UPDATE that moves failed dead letters of promotion
// $1, those named by $2 (all if NULL), to state $3 at time $4, with extra
// conditions and.
func transitionSQL(and string) string {
	return `UPDATE dead_letters SET state = $3, applied = false, moved_at = $4
		WHERE promotion_id = $1 AND state = 'failed'
		  AND ($2::text[] IS NULL OR claim_id = ANY($2::text[]))
		  ` + and + `
		RETURNING ` + deadLetterCols
}

// collectMoved reads the dead letters a transition returned.
func collectMoved(rows pgx.Rows, err error) ([]store.DeadLetter, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanDeadLetter)
}

// void moves the named failed claims (all failed ones of the promotion if
// claimIDs is nil) to DeadVoided, skipping claims that have an issued row:
// such a claim already took its unit, and voiding would return it.
//
// A void must not pass an issue of the same claim in flight: under READ
// COMMITTED each statement checks the other table for rows the other has not
// committed yet. Both take the claim's lock first (see claimLocks), and the
// void's UPDATE runs as a new statement after it, so it sees an issue that
// committed meanwhile; an issue that starts later waits for the void and
// then finds the claim voided. The claim.voided events of the claims it
// voids are written in the same transaction.
func (s *Store) void(ctx context.Context, promotionID string, claimIDs []string) ([]store.DeadLetter, error) {
	var out []store.DeadLetter
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		ids := claimIDs
		if ids == nil {
			// Only the claims locked here are voided: a claim that fails
			// after this read is left for a later call.
			rows, err := tx.Query(ctx, `SELECT claim_id FROM dead_letters
				WHERE promotion_id = $1 AND state = 'failed'`, promotionID)
			if err != nil {
				return err
			}
			if ids, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
			if len(ids) == 0 {
				return nil
			}
		}
		if err := lockClaims(ctx, tx, []string{promotionID}, ids); err != nil {
			return err
		}
		now := time.Now()
		var err error
		out, err = collectMoved(tx.Query(ctx,
			transitionSQL(`AND NOT EXISTS (SELECT 1 FROM issued WHERE issued.claim_id = dead_letters.claim_id)`),
			promotionID, ids, store.DeadVoided, pgTime(now)))
		if err != nil {
			return err
		}
		sqlstore.SortByClaimID(out)
		evs, err := sqlstore.VoidEvents(out, now)
		if err != nil {
			return err
		}
		_, err = writeEvents(ctx, tx, evs)
		return err
	})
	return out, err
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
