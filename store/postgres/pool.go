package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/dibsio/dibs/store"
)

// poolSizeQuery counts a promotion's pool codes, and the free ones.
const poolSizeQuery = `SELECT count(*), count(*) FILTER (WHERE claim_id IS NULL) FROM code_pool WHERE promotion_id = $1`

// AddPoolCodes adds codes to the promotion's pool in one transaction; a
// code the pool holds already is a duplicate and changes nothing.
func (s *Store) AddPoolCodes(ctx context.Context, promotionID string, codes []string) (store.PoolAdded, error) {
	var out store.PoolAdded
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO code_pool (promotion_id, code)
			SELECT $1, c FROM unnest($2::text[]) AS c ON CONFLICT DO NOTHING`, promotionID, codes)
		if err != nil {
			return err
		}
		out.Added = tag.RowsAffected()
		out.Duplicates = int64(len(codes)) - out.Added
		return tx.QueryRow(ctx, poolSizeQuery, promotionID).Scan(&out.Total, &out.Free)
	})
	if err != nil {
		return store.PoolAdded{}, wrapErr("add pool codes "+promotionID, err)
	}
	return out, nil
}

// PoolSize returns how many codes the promotion's pool holds, and how many
// are free.
func (s *Store) PoolSize(ctx context.Context, promotionID string) (total, free int64, err error) {
	if err := s.pool.QueryRow(ctx, poolSizeQuery, promotionID).Scan(&total, &free); err != nil {
		return 0, 0, wrapErr("pool size "+promotionID, err)
	}
	return total, free, nil
}
