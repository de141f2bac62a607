package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

// maxAttempts bounds how often IssueBatch reruns its insert after the
// database aborted it to break a deadlock.
const maxAttempts = 5

// insertIssued is the multi-row insert. The rows travel as seven arrays, so
// the statement has seven parameters whatever the batch size (no chunking
// under the 65535-parameter limit, one prepared statement for every size).
// ON CONFLICT DO NOTHING without a target covers the primary key and both
// unique keys; a claim an admin voided is never written (a Conflict);
// RETURNING names the rows actually written.
const insertIssued = `INSERT INTO issued (claim_id, promotion_id, user_id, rank, slot, accepted_at)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::integer[], $6::timestamptz[])
		AS u(claim_id, promotion_id, user_id, rank, slot, accepted_at)
	WHERE NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.claim_id = u.claim_id AND d.state = 'voided')
	ON CONFLICT DO NOTHING
	RETURNING claim_id, promotion_id, user_id, rank, slot`

// IssueBatch writes the issues with one multi-row INSERT ... ON CONFLICT DO
// NOTHING RETURNING, in one transaction, and reports an
// Outcome per issue, in order: Inserted for the rows written, Duplicate when
// the same claim is already stored with the same content, Conflict
// otherwise. issued_at is the database's now().
//
// Concurrent batches are safe: a row another transaction is inserting makes
// this one wait for it, then skip the row if it committed. Rows are inserted
// in claim id order, so overlapping batches of consistent claims take their
// locks in the same order and cannot deadlock; if inconsistent ones do, the
// insert is retried. Before inserting, the batch takes its claims' advisory
// locks (see claimLocks), which a void of one of them takes too, and the
// outbox lock (see outboxLockKey), in the same round trip as the insert
// (see issueTx). The inserted claims' claim.accepted and claim.issued
// events are written last, in the same transaction.
func (s *Store) IssueBatch(ctx context.Context, issues []store.Issue) ([]store.Outcome, error) {
	if len(issues) == 0 {
		return []store.Outcome{}, nil
	}
	out, err := s.issueBatch(ctx, issues)
	if err != nil {
		return nil, wrapErr(fmt.Sprintf("issue batch of %d", len(issues)), err)
	}
	return out, nil
}

func (s *Store) issueBatch(ctx context.Context, issues []store.Issue) ([]store.Outcome, error) {
	order := make([]int, len(issues))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return strings.Compare(issues[a].ClaimID, issues[b].ClaimID)
	})
	var (
		claimIDs = make([]string, len(issues))
		promos   = make([]string, len(issues))
		users    = make([]string, len(issues))
		ranks    = make([]int64, len(issues))
		slots    = make([]int32, len(issues))
		accepted = make([]time.Time, len(issues))
	)
	for j, i := range order {
		is := issues[i]
		claimIDs[j], promos[j], users[j] = is.ClaimID, is.PromotionID, is.UserID
		ranks[j], slots[j], accepted[j] = is.Rank, int32(is.Slot), pgTime(is.AcceptedAt)
	}

	var outcomes *sqlstore.Outcomes
	for attempt := 1; ; attempt++ {
		var err error
		outcomes, err = s.issueTx(ctx, issues, issueArgs{claimIDs, promos, users, ranks, slots, accepted})
		if err == nil {
			break
		}
		if attempt < maxAttempts && retryable(err) {
			continue
		}
		return nil, err
	}

	// Every issue not inserted hit a unique key. It is a duplicate only if
	// the row stored under its claim id has the same content. This is a new
	// statement, so it sees the rows that concurrent batches committed.
	rest := outcomes.Rest()
	if len(rest) == 0 {
		return outcomes.Settle(nil), nil
	}
	rows, err := s.pool.Query(ctx, `SELECT claim_id, promotion_id, user_id, rank, slot
		FROM issued WHERE claim_id = ANY($1)`, rest)
	if err != nil {
		return nil, err
	}
	storedRows, err := pgx.CollectRows(rows, scanKey)
	if err != nil {
		return nil, err
	}
	stored := make(map[string]sqlstore.IssueKey, len(storedRows))
	for _, k := range storedRows {
		stored[k.ClaimID] = k
	}
	return outcomes.Settle(stored), nil
}

// The grant inserts. Rows travel as arrays, like insertIssued's. A code
// another claim holds is skipped (and made anew by sqlstore.WriteCodes); a
// concurrent transaction inserting the same code makes this one wait for
// it, then skip the row if it committed.
const (
	insertCodes = `INSERT INTO codes (code, claim_id, promotion_id, value, expires_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[])
		ON CONFLICT DO NOTHING RETURNING claim_id`
	insertLedger = `INSERT INTO ledger (claim_id, user_id, promotion_id, amount)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])`
)

// Pool codes. takePoolCodes pairs the free codes it locks with the claims
// in order; SKIP LOCKED lets concurrent batches take different codes
// without waiting. Codes locked by other transactions are skipped, so a
// short answer does not mean the pool is dry: takePoolCodesWait, which
// waits for those locks, decides that (see takePool).
const hasPool = `SELECT EXISTS (SELECT 1 FROM code_pool WHERE promotion_id = $1)`

// takePoolQuery is the take; lock is the locking clause of its free codes.
func takePoolQuery(lock string) string {
	return `WITH free AS (
			SELECT code FROM code_pool WHERE promotion_id = $1 AND claim_id IS NULL
			LIMIT cardinality($2::text[]) ` + lock + `),
		numbered AS (SELECT code, row_number() OVER () AS n FROM free),
		claims AS (SELECT * FROM unnest($2::text[], $3::bigint[]) WITH ORDINALITY AS u(claim_id, value, n))
		UPDATE code_pool p SET claim_id = claims.claim_id, value = claims.value, taken_at = now()
		FROM numbered JOIN claims ON claims.n = numbered.n
		WHERE p.promotion_id = $1 AND p.code = numbered.code
		RETURNING p.claim_id`
}

var (
	takePoolCodes     = takePoolQuery("FOR UPDATE SKIP LOCKED")
	takePoolCodesWait = takePoolQuery("FOR UPDATE")
)

// takePool takes free codes of promotion id's pool for issues, in order,
// and returns the claim ids served. When the skipping take serves none,
// the waiting one runs: it returns none only if no code is free once the
// transactions holding them are done.
func takePool(ctx context.Context, tx pgConn, id string, issues []store.Issue) ([]string, error) {
	claims, values := make([]string, len(issues)), make([]int64, len(issues))
	for i, is := range issues {
		claims[i], values[i] = is.ClaimID, is.Grant.Value
	}
	for _, q := range []string{takePoolCodes, takePoolCodesWait} {
		rows, err := tx.Query(ctx, q, id, claims, values)
		if err != nil {
			return nil, err
		}
		served, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(served) > 0 {
			return served, err
		}
	}
	return nil, nil
}

// writeGrants writes the codes and ledger entries of the issues just
// inserted, inside tx. pools says, for the promotions it names, whether
// they have a code pool; the others are asked.
func writeGrants(ctx context.Context, tx pgConn, inserted []store.Issue, pools map[string]bool) error {
	coded, err := sqlstore.TakePoolCodes(inserted, func(id string) (bool, error) {
		if ok, known := pools[id]; known {
			return ok, nil
		}
		var ok bool
		err := tx.QueryRow(ctx, hasPool, id).Scan(&ok)
		return ok, err
	}, func(id string, issues []store.Issue) ([]string, error) {
		return takePool(ctx, tx, id, issues)
	})
	if err != nil {
		return err
	}
	err = sqlstore.WriteCodes(coded, func(rows []sqlstore.CodeRow) ([]string, error) {
		var (
			codes, claims, promos = make([]string, len(rows)), make([]string, len(rows)), make([]string, len(rows))
			values                = make([]int64, len(rows))
			expires               = make([]*time.Time, len(rows))
		)
		for i, r := range rows {
			codes[i], claims[i], promos[i] = r.Code, r.Issue.ClaimID, r.Issue.PromotionID
			values[i], expires[i] = r.Issue.Grant.Value, pgNullTime(r.Issue.Grant.ExpiresAt)
		}
		res, err := tx.Query(ctx, insertCodes, codes, claims, promos, values, expires)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(res, pgx.RowTo[string])
	})
	if err != nil {
		return err
	}
	credits := sqlstore.Credits(inserted)
	if len(credits) == 0 {
		return nil
	}
	var (
		claims, users, promos = make([]string, len(credits)), make([]string, len(credits)), make([]string, len(credits))
		amounts               = make([]int64, len(credits))
	)
	for i, is := range credits {
		claims[i], users[i], promos[i], amounts[i] = is.ClaimID, is.UserID, is.PromotionID, is.Grant.Points
	}
	_, err = tx.Exec(ctx, insertLedger, claims, users, promos, amounts)
	return err
}

func scanKey(row pgx.CollectableRow) (sqlstore.IssueKey, error) {
	return sqlstore.ScanIssueKey(row)
}

// retryable reports a deadlock or serialization failure: the statement was
// rolled back and can simply run again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// ListIssued returns the user's issued rows in the promotion, by slot.
func (s *Store) ListIssued(ctx context.Context, promotionID, userID string) ([]store.Issued, error) {
	return s.issuedRows(ctx, "list issued", `SELECT `+sqlstore.IssuedCols+` FROM `+sqlstore.IssuedFrom+`
		WHERE i.promotion_id = $1 AND i.user_id = $2 ORDER BY i.slot`, promotionID, userID)
}

// IssuedByRank returns up to limit issued rows of the promotion with rank >
// afterRank, ordered by rank, each with its grant.
func (s *Store) IssuedByRank(ctx context.Context, promotionID string, afterRank int64, limit int) ([]store.Issued, error) {
	return s.issuedRows(ctx, "issued by rank", `SELECT `+sqlstore.IssuedCols+` FROM `+sqlstore.IssuedFrom+`
		WHERE i.promotion_id = $1 AND i.rank > $2 ORDER BY i.rank LIMIT $3`, promotionID, afterRank, max(limit, 0))
}

// issuedRows runs a query of sqlstore.IssuedCols.
func (s *Store) issuedRows(ctx context.Context, op, query string, args ...any) ([]store.Issued, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, wrapErr(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Issued, error) {
		return sqlstore.ScanIssued(row, pgTimes)
	})
	if err != nil {
		return nil, wrapErr(op, err)
	}
	return out, nil
}

// Balance returns the sum and count of the user's ledger entries.
func (s *Store) Balance(ctx context.Context, userID string) (store.Balance, error) {
	b := store.Balance{UserID: userID}
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(sum(amount), 0)::bigint, count(*) FROM ledger WHERE user_id = $1`,
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
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM issued WHERE promotion_id = $1),
		(SELECT count(*) FROM dead_letters d WHERE d.promotion_id = $1 AND d.state = 'failed' AND d.rank > 0
			AND NOT EXISTS (SELECT 1 FROM issued i WHERE i.promotion_id = d.promotion_id AND i.rank = d.rank)),
		(SELECT count(*) FROM dead_letters d WHERE d.promotion_id = $1 AND d.state = 'voided' AND d.rank > 0
			AND NOT EXISTS (SELECT 1 FROM issued i WHERE i.promotion_id = d.promotion_id AND i.rank = d.rank)),
		(SELECT count(*) FROM issued WHERE promotion_id = $1 AND revoked_at IS NOT NULL),
		(SELECT count(*) FROM issued WHERE promotion_id = $1 AND revoked_at IS NOT NULL AND revoke_returned)`,
		promotionID).Scan(&c.Issued, &c.Failed, &c.Voided, &c.Revoked, &c.RevokedReturned)
	if err != nil {
		return store.Counts{}, wrapErr("counts "+promotionID, err)
	}
	return c, nil
}
