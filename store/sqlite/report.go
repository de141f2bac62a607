package sqlite

import (
	"context"
	"database/sql"
	"time"

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
	args := []any{promotionID, fmtTime(from), fmtTime(to), n}
	queries := []struct {
		sql string
		add func(rows *sql.Rows) error
	}{
		{`SELECT unixepoch(accepted_at) / ?4 * ?4, count(*) FROM issued
			WHERE promotion_id = ?1 AND accepted_at >= ?2 AND accepted_at < ?3 GROUP BY 1`,
			func(rows *sql.Rows) error {
				var at, c int64
				err := rows.Scan(&at, &c)
				tl.At(at).Accepted += c
				return err
			}},
		{`SELECT unixepoch(issued_at) / ?4 * ?4, count(*),
				CAST(round(max(unixepoch(issued_at, 'subsec') - unixepoch(accepted_at, 'subsec')) * 1000) AS INTEGER)
			FROM issued WHERE promotion_id = ?1 AND issued_at >= ?2 AND issued_at < ?3 GROUP BY 1`,
			func(rows *sql.Rows) error {
				var at, c, lag int64
				err := rows.Scan(&at, &c, &lag)
				b := tl.At(at)
				b.Issued += c
				b.MaxLag = max(b.MaxLag, time.Duration(lag)*time.Millisecond)
				return err
			}},
		{`SELECT unixepoch(at) / ?4 * ?4, count(*) FROM dead_letters
			WHERE promotion_id = ?1 AND rank > 0 AND at >= ?2 AND at < ?3 GROUP BY 1`,
			func(rows *sql.Rows) error {
				var at, c int64
				err := rows.Scan(&at, &c)
				tl.At(at).DeadLettered += c
				return err
			}},
	}
	for _, qq := range queries {
		rows, err := s.r.QueryContext(ctx, qq.sql, args...)
		if err != nil {
			return nil, wrapErr("claim timeline "+promotionID, err)
		}
		for rows.Next() {
			if err := qq.add(rows); err != nil {
				rows.Close()
				return nil, wrapErr("claim timeline "+promotionID, err)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, wrapErr("claim timeline "+promotionID, err)
		}
	}
	return tl.Buckets(), nil
}

// lagMS is the SQL of an issued row's issued_at − accepted_at in whole
// milliseconds.
const lagMS = `CAST(round((unixepoch(issued_at, 'subsec') - unixepoch(accepted_at, 'subsec')) * 1000) AS INTEGER)`

// ClaimSummary implements store.Reports. The percentiles are read with an
// ordered scan of the promotion's lags (OFFSET at the nearest rank): one
// sort per percentile, for a report, never on the claim path.
func (s *Store) ClaimSummary(ctx context.Context, promotionID string) (store.ClaimSummary, error) {
	out := store.ClaimSummary{DeadLetters: map[string]int64{}}
	var first, last, lastIssued sql.NullString
	var maxLag sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT count(*), count(revoked_at), min(accepted_at), max(accepted_at),
			max(issued_at), max(`+lagMS+`)
		FROM issued WHERE promotion_id = ?1`, promotionID).
		Scan(&out.Issued, &out.Revoked, &first, &last, &lastIssued, &maxLag)
	if err != nil {
		return store.ClaimSummary{}, wrapErr("claim summary "+promotionID, err)
	}
	for _, t := range []struct {
		dst *time.Time
		src sql.NullString
	}{{&out.FirstAcceptedAt, first}, {&out.LastAcceptedAt, last}, {&out.LastIssuedAt, lastIssued}} {
		if *t.dst, err = parseNullTime(t.src); err != nil {
			return store.ClaimSummary{}, wrapErr("claim summary "+promotionID, err)
		}
	}
	out.LagMax = time.Duration(maxLag.Int64) * time.Millisecond
	for _, p := range []struct {
		q   float64
		dst *time.Duration
	}{{0.5, &out.LagP50}, {0.99, &out.LagP99}} {
		if out.Issued == 0 {
			break
		}
		var ms int64
		err := s.r.QueryRowContext(ctx, `SELECT `+lagMS+` AS lag FROM issued WHERE promotion_id = ?1
			ORDER BY lag LIMIT 1 OFFSET ?2`, promotionID, store.NearestRank(p.q, out.Issued)).Scan(&ms)
		if err != nil {
			return store.ClaimSummary{}, wrapErr("claim summary "+promotionID, err)
		}
		*p.dst = time.Duration(ms) * time.Millisecond
	}
	rows, err := s.r.QueryContext(ctx, `SELECT state, count(*) FROM dead_letters
		WHERE promotion_id = ?1 AND rank > 0 GROUP BY state`, promotionID)
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
