package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// UnhandledDeadLetters returns the number of dead letters in state failed
// of each promotion that has any and is not retired.
func (s *Store) UnhandledDeadLetters(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT d.promotion_id, count(*) FROM dead_letters d
		WHERE d.state = 'failed'
		AND NOT EXISTS (SELECT 1 FROM promotions p WHERE p.id = d.promotion_id AND p.retired_at IS NOT NULL)
		GROUP BY d.promotion_id`)
	if err != nil {
		return nil, wrapErr("count unhandled dead letters", err)
	}
	out := make(map[string]int64)
	var (
		id string
		n  int64
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		out[id] = n
		return nil
	})
	if err != nil {
		return nil, wrapErr("count unhandled dead letters", err)
	}
	return out, nil
}
