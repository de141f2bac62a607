package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

// ClaimTimeline implements store.Reports: three grouped reads over the
// promotion's rows (by accepted_at, by issued_at, dead letters by at),
// each bucket the Unix seconds of the time rounded down to the bucket.
func (s *Store) ClaimTimeline(ctx context.Context, promotionID string, q store.TimelineQuery) ([]store.TimeBucket, error) {
	n, from, to, err := sqlstore.TimelineBounds(q)
	if err != nil {
		return nil, err
	}
	tl := sqlstore.NewTimeline()
	args := []any{promotionID, from, to, n}
	queries := []struct {
		sql string
		add func(rows pgx.Rows) error
	}{
		{`SELECT floor(extract(epoch FROM accepted_at) / $4::bigint)::bigint * $4::bigint, count(*) FROM issued
			WHERE promotion_id = $1 AND accepted_at >= $2 AND accepted_at < $3 GROUP BY 1`,
			func(rows pgx.Rows) error {
				var at, c int64
				err := rows.Scan(&at, &c)
				tl.At(at).Accepted += c
				return err
			}},
		{`SELECT floor(extract(epoch FROM issued_at) / $4::bigint)::bigint * $4::bigint, count(*),
				round(max(extract(epoch FROM issued_at - accepted_at)) * 1000)::bigint
			FROM issued WHERE promotion_id = $1 AND issued_at >= $2 AND issued_at < $3 GROUP BY 1`,
			func(rows pgx.Rows) error {
				var at, c, lag int64
				err := rows.Scan(&at, &c, &lag)
				b := tl.At(at)
				b.Issued += c
				b.MaxLag = max(b.MaxLag, time.Duration(lag)*time.Millisecond)
				return err
			}},
		{`SELECT floor(extract(epoch FROM at) / $4::bigint)::bigint * $4::bigint, count(*) FROM dead_letters
			WHERE promotion_id = $1 AND rank > 0 AND at >= $2 AND at < $3 GROUP BY 1`,
			func(rows pgx.Rows) error {
				var at, c int64
				err := rows.Scan(&at, &c)
				tl.At(at).DeadLettered += c
				return err
			}},
	}
	for _, qq := range queries {
		rows, err := s.pool.Query(ctx, qq.sql, args...)
		if err != nil {
			return nil, wrapErr("claim timeline "+promotionID, err)
		}
		for rows.Next() {
			if err := qq.add(rows); err != nil {
				rows.Close()
				return nil, wrapErr("claim timeline "+promotionID, err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, wrapErr("claim timeline "+promotionID, err)
		}
	}
	return tl.Buckets(), nil
}

// lagMS is the SQL of an issued row's issued_at − accepted_at in whole
// milliseconds.
const lagMS = `round(extract(epoch FROM issued_at - accepted_at) * 1000)::bigint`

// ClaimSummary implements store.Reports: the percentiles are the nearest
// rank (percentile_disc), as store.NearestRank defines it.
func (s *Store) ClaimSummary(ctx context.Context, promotionID string) (store.ClaimSummary, error) {
	out := store.ClaimSummary{DeadLetters: map[string]int64{}}
	var first, last, lastIssued *time.Time
	var p50, p99, maxLag *int64
	err := s.pool.QueryRow(ctx, `SELECT count(*), count(revoked_at), min(accepted_at), max(accepted_at), max(issued_at),
			percentile_disc(0.5) WITHIN GROUP (ORDER BY `+lagMS+`),
			percentile_disc(0.99) WITHIN GROUP (ORDER BY `+lagMS+`),
			max(`+lagMS+`)
		FROM issued WHERE promotion_id = $1`, promotionID).
		Scan(&out.Issued, &out.Revoked, &first, &last, &lastIssued, &p50, &p99, &maxLag)
	if err != nil {
		return store.ClaimSummary{}, wrapErr("claim summary "+promotionID, err)
	}
	for _, t := range []struct {
		dst *time.Time
		src *time.Time
	}{{&out.FirstAcceptedAt, first}, {&out.LastAcceptedAt, last}, {&out.LastIssuedAt, lastIssued}} {
		if t.src != nil {
			*t.dst = t.src.UTC()
		}
	}
	for _, d := range []struct {
		dst *time.Duration
		src *int64
	}{{&out.LagP50, p50}, {&out.LagP99, p99}, {&out.LagMax, maxLag}} {
		if d.src != nil {
			*d.dst = time.Duration(*d.src) * time.Millisecond
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT state, count(*) FROM dead_letters
		WHERE promotion_id = $1 AND rank > 0 GROUP BY state`, promotionID)
	if err != nil {
		return store.ClaimSummary{}, wrapErr("claim summary "+promotionID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int64
		if err := rows.Scan(&state, &n); err != nil {
			return store.ClaimSummary{}, wrapErr("claim summary "+promotionID, err)
		}
		out.DeadLetters[state] = n
	}
	if err := rows.Err(); err != nil {
		return store.ClaimSummary{}, wrapErr("claim summary "+promotionID, err)
	}
	return out, nil
}
