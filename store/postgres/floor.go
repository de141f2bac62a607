package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

// MaxRanks returns, for each promotion, the highest rank held by an issued
// row or a dead letter (0 for none). The issued side is one backward probe
// of the UNIQUE (promotion_id, rank) index; the dead-letter side reads only
// the promotion's own dead letters through dead_letters_by_state.
func (s *Store) MaxRanks(ctx context.Context, promotionIDs []string) (map[string]int64, error) {
	out := make(map[string]int64, len(promotionIDs))
	if len(promotionIDs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT p.id, greatest(
			coalesce((SELECT max(rank) FROM issued WHERE promotion_id = p.id), 0),
			coalesce((SELECT max(rank) FROM dead_letters WHERE promotion_id = p.id), 0))
		FROM unnest($1::text[]) AS p(id)`, promotionIDs)
	if err != nil {
		return nil, wrapErr("max ranks", err)
	}
	defer rows.Close()
	if err := sqlstore.CollectMaxRanks(rows, out); err != nil {
		return nil, wrapErr("max ranks", err)
	}
	return out, nil
}

// ClaimsByRank returns up to limit claims of the promotion with rank >
// afterRank, by rank: issued rows, and dead letters whose rank no issued row
// holds. Each side is limited before the merge, so a page reads at most
// 2 × limit rows whatever the promotion's size; issued rows come in index
// order, dead letters (few, normally) are sorted. A time of 'infinity' or
// '-infinity', which has no time.Time, comes back as a zero At.
func (s *Store) ClaimsByRank(ctx context.Context, promotionID string, afterRank int64, limit int) ([]store.KnownClaim, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `(SELECT claim_id, rank, user_id, slot, 'issued' AS state,
				CASE WHEN isfinite(issued_at) THEN issued_at END AS at, '{}' AS fields
			FROM issued WHERE promotion_id = $1 AND rank > $2
			ORDER BY rank LIMIT $3)
		UNION ALL
		(SELECT d.claim_id, d.rank, d.user_id, d.slot, d.state,
				CASE WHEN isfinite(d.at) THEN d.at END, d.fields::text
			FROM dead_letters AS d
			WHERE d.promotion_id = $1 AND d.rank > $2
			  AND NOT EXISTS (SELECT 1 FROM issued AS i WHERE i.promotion_id = $1 AND i.rank = d.rank)
			ORDER BY d.rank, d.claim_id LIMIT $3)
		ORDER BY rank LIMIT $3`, promotionID, afterRank, limit)
	if err != nil {
		return nil, wrapErr("claims by rank", err)
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.KnownClaim, error) {
		return sqlstore.ScanKnownClaim(row, pgTimes)
	})
	if err != nil {
		return nil, wrapErr("claims by rank", err)
	}
	return sqlstore.OnePerRank(all), nil
}
