package postgres

import (
	"context"
	"hash/fnv"
	"slices"

	"github.com/jackc/pgx/v5"
)

// maxClaimLocks bounds the claim locks one transaction takes: an operation
// on more claims locks each of their promotions exclusively instead, so the
// locks of one transaction (they live in PostgreSQL's shared lock table,
// sized by max_locks_per_transaction) stay few whatever the batch size.
const maxClaimLocks = 256

// advisoryLock is one transaction-level advisory lock: its key, and whether
// it is taken exclusively or shared.
type advisoryLock struct {
	key       int64
	exclusive bool
}

// lockKey is the advisory lock key of a claim or promotion id, kept apart
// from each other by kind ("claim" or "promotion") and from the migration
// lock by the "dibs:" prefix (a collision costs only a wait, never
// correctness).
func lockKey(kind, id string) int64 {
	h := fnv.New64a()
	h.Write([]byte("dibs:" + kind + ":" + id))
	return int64(h.Sum64())
}

// claimLocks returns the advisory locks that serialise an issue and a void
// of the same claim, whether or not its dead letter exists yet: each claim
// of claimIDs locked exclusively and each promotion of promotionIDs shared;
// or, for more than maxClaimLocks distinct claims, each promotion
// exclusively and no claim locks. Either way two operations that share a
// claim conflict on a lock. The locks are ordered by key, one per key (the
// exclusive one where a claim and a promotion share a key), so transactions
// taking them in this order never deadlock on each other.
func claimLocks(promotionIDs, claimIDs []string) []advisoryLock {
	claims := slices.Clone(claimIDs)
	slices.Sort(claims)
	claims = slices.Compact(claims)
	manyClaims := len(claims) > maxClaimLocks
	locks := make([]advisoryLock, 0, len(promotionIDs)+len(claims))
	for _, p := range promotionIDs {
		locks = append(locks, advisoryLock{key: lockKey("promotion", p), exclusive: manyClaims})
	}
	if !manyClaims {
		for _, c := range claims {
			locks = append(locks, advisoryLock{key: lockKey("claim", c), exclusive: true})
		}
	}
	slices.SortFunc(locks, func(a, b advisoryLock) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		case a.exclusive != b.exclusive: // the exclusive one first, kept by Compact
			if a.exclusive {
				return -1
			}
			return 1
		}
		return 0
	})
	return slices.CompactFunc(locks, func(a, b advisoryLock) bool { return a.key == b.key })
}

// lockClaimsSQL takes the locks of two arrays, their keys and whether
// each is exclusive, in array order, with one statement.
const lockClaimsSQL = `SELECT CASE WHEN l.exclusive THEN pg_advisory_xact_lock(l.key)
		ELSE pg_advisory_xact_lock_shared(l.key) END
	FROM unnest($1::bigint[], $2::boolean[]) WITH ORDINALITY AS l(key, exclusive, n)
	ORDER BY l.n`

// lockClaimsArgs returns the arguments of lockClaimsSQL that take the
// locks claimLocks names, in its order.
func lockClaimsArgs(promotionIDs, claimIDs []string) []any {
	locks := claimLocks(promotionIDs, claimIDs)
	keys := make([]int64, len(locks))
	exclusive := make([]bool, len(locks))
	for i, l := range locks {
		keys[i], exclusive[i] = l.key, l.exclusive
	}
	return []any{keys, exclusive}
}

// lockClaims takes, in tx, the locks claimLocks names, in its order, with
// one statement. They are held until tx ends. Statements that tx runs
// afterwards see every row a transaction holding one of those locks before
// committed.
func lockClaims(ctx context.Context, tx pgx.Tx, promotionIDs, claimIDs []string) error {
	_, err := tx.Exec(ctx, lockClaimsSQL, lockClaimsArgs(promotionIDs, claimIDs)...)
	return err
}
