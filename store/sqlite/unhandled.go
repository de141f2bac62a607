package sqlite

import "context"

// UnhandledDeadLetters returns the number of dead letters in state failed
// of each promotion that has any and is not retired.
func (s *Store) UnhandledDeadLetters(ctx context.Context) (map[string]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT d.promotion_id, count(*) FROM dead_letters d
		WHERE d.state = 'failed'
		AND NOT EXISTS (SELECT 1 FROM promotions p WHERE p.id = d.promotion_id AND p.retired_at IS NOT NULL)
		GROUP BY d.promotion_id`)
	if err != nil {
		return nil, wrapErr("count unhandled dead letters", err)
	}
	defer rows.Close()
	out := make(map[string]int64)
	for rows.Next() {
		var (
			id string
			n  int64
		)
		if err := rows.Scan(&id, &n); err != nil {
			return nil, wrapErr("count unhandled dead letters", err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr("count unhandled dead letters", err)
	}
	return out, nil
}
