package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/dibsio/dibs/store"
)

// AddPoolCodes adds codes to the promotion's pool in one transaction; a
// code the pool holds already is a duplicate and changes nothing.
func (s *Store) AddPoolCodes(ctx context.Context, promotionID string, codes []string) (store.PoolAdded, error) {
	var out store.PoolAdded
	js, err := json.Marshal(codes)
	if err != nil {
		return out, err
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO code_pool (promotion_id, code, added_at)
			SELECT ?, j.value, ? FROM json_each(?) j WHERE true ON CONFLICT DO NOTHING`,
			promotionID, fmtTime(time.Now()), string(js))
		if err != nil {
			return err
		}
		if out.Added, err = res.RowsAffected(); err != nil {
			return err
		}
		out.Duplicates = int64(len(codes)) - out.Added
		return poolSize(ctx, tx, promotionID, &out.Total, &out.Free)
	})
	if err != nil {
		return store.PoolAdded{}, wrapErr("add pool codes "+promotionID, err)
	}
	return out, nil
}

// PoolSize returns how many codes the promotion's pool holds, and how many
// are free.
func (s *Store) PoolSize(ctx context.Context, promotionID string) (total, free int64, err error) {
	if err := poolSize(ctx, s.r, promotionID, &total, &free); err != nil {
		return 0, 0, wrapErr("pool size "+promotionID, err)
	}
	return total, free, nil
}

// poolSize counts the promotion's pool codes, and the free ones, through q
// (the reader pool or a transaction).
func poolSize(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, promotionID string, total, free *int64) error {
	return q.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE claim_id IS NULL)
		FROM code_pool WHERE promotion_id = ?`, promotionID).Scan(total, free)
}
