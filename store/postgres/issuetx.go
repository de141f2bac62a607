package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

// pgConn is what the issue path runs its statements on: a transaction, or
// a connection inside a transaction it began itself.
type pgConn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// issueArgs are insertIssued's arrays, in claim id order.
type issueArgs struct {
	claimIDs, promos, users []string
	ranks                   []int64
	slots                   []int32
	accepted                []time.Time
}

// issueTx writes one batch in one transaction, in three round trips where
// pgx.BeginFunc and a statement each took six:
//
//  1. BEGIN, the claims' locks (see claimLocks), the outbox lock (see
//     outboxLockKey), the issued rows' insert and whether the promotions
//     whose claims ask for pool codes have a pool, as one pipeline: the
//     statements run one after the other, so the insert, a statement of
//     its own, sees every row a void of one of the claims committed before
//     it released its lock;
//  2. the grants: the codes (again for a code another claim holds) or the
//     ledger entries, and the pool codes taken;
//  3. the claim.accepted and claim.issued events of the inserted claims,
//     and COMMIT, as one pipeline.
//
// On an error the transaction is rolled back, and the connection goes back
// to the pool (or is closed, if the rollback could not run).
func (s *Store) issueTx(ctx context.Context, issues []store.Issue, a issueArgs) (*sqlstore.Outcomes, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	done := false
	defer func() {
		if !done && conn.Conn().PgConn().TxStatus() != 'I' {
			_, _ = conn.Exec(ctx, "rollback")
		}
	}()

	pooled := poolPromotions(issues)
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(lockClaimsSQL, lockClaimsArgs(a.promos, a.claimIDs)...)
	b.Queue(lockOutboxSQL, outboxLockKey)
	b.Queue(insertIssued, a.claimIDs, a.promos, a.users, a.ranks, a.slots, a.accepted)
	for _, id := range pooled {
		b.Queue(hasPool, id)
	}
	issuedAt, written, pools, err := readFirst(conn.SendBatch(ctx, b), pooled)
	if err != nil {
		return nil, err
	}

	outcomes := sqlstore.NewOutcomes(issues)
	for _, k := range written {
		if err := outcomes.Inserted(k); err != nil {
			return nil, err
		}
	}
	inserted := outcomes.InsertedIssues()
	if err := writeGrants(ctx, conn, inserted, pools); err != nil {
		return nil, err
	}
	evs, err := sqlstore.IssueEvents(inserted, issuedAt)
	if err != nil {
		return nil, err
	}
	b = &pgx.Batch{}
	if len(evs) > 0 {
		b.Queue(insertEvents, eventArrays(evs)...)
	}
	b.Queue("commit")
	br := conn.SendBatch(ctx, b)
	var tag pgconn.CommandTag
	for range b.Len() {
		if tag, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && tag.String() != "COMMIT" {
		err = fmt.Errorf("the transaction ended with %q, not COMMIT", tag.String())
	}
	if err != nil {
		return nil, err
	}
	done = true
	return outcomes, nil
}

// readFirst reads the answers of issueTx's first pipeline: the
// transaction's now() (the rows' issued_at and their events' issue time),
// the key of each row written, and whether each promotion of pooled has a
// code pool.
func readFirst(br pgx.BatchResults, pooled []string) (time.Time, []sqlstore.IssueKey, map[string]bool, error) {
	var (
		now     time.Time
		written []sqlstore.IssueKey
		pools   = make(map[string]bool, len(pooled))
	)
	_, err := br.Exec() // begin
	if err == nil {
		_, err = br.Exec() // the claims' locks
	}
	if err == nil {
		err = br.QueryRow().Scan(&now)
	}
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			written, err = pgx.CollectRows(rows, scanKey)
		}
	}
	for _, id := range pooled {
		if err != nil {
			break
		}
		var ok bool
		err = br.QueryRow().Scan(&ok)
		pools[id] = ok
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return now.UTC(), written, pools, err
}

// poolPromotions returns, sorted, the promotions whose issues ask for pool
// codes.
func poolPromotions(issues []store.Issue) []string {
	var ids []string
	for _, is := range issues {
		if is.Grant.Pool && !slices.Contains(ids, is.PromotionID) {
			ids = append(ids, is.PromotionID)
		}
	}
	slices.Sort(ids)
	return ids
}
