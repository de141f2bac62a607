package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

// PostgreSQL hands out seqs when rows are inserted, not when their
// transactions commit: a reader paging by seq could see seq 6 committed
// while seq 5's transaction is still open, move past 5, and never see it.
// So every transaction that writes events takes outboxLockKey shared
// (writers never wait for each other) before it inserts them and holds it
// until it ends, and a feed reader takes it exclusively for a moment: once
// it holds it, no transaction holding a seq is open, so every seq up to
// the highest one visible is committed (or rolled back, a gap) and any seq
// handed out later is higher. The reader then serves events up to that
// horizon only. It waits at most for the commits in flight; writers that
// arrive meanwhile wait for it as long.
var outboxLockKey = lockKey("outbox", "events")

// feedLockTimeout bounds how long a feed read waits for the writers in
// flight before it fails with store.ErrUnavailable.
const feedLockTimeout = "5s"

// insertEvents writes events from arrays, in array order (so their seqs
// follow it); a promotion event written already is skipped
// (events_promotion).
const insertEvents = `INSERT INTO events (id, type, at, promotion_id, claim_id, data)
	SELECT u.id, u.type, u.at, u.promotion_id, NULLIF(u.claim_id, ''), u.data::jsonb
	FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[])
		WITH ORDINALITY AS u(id, type, at, promotion_id, claim_id, data, n)
	ORDER BY u.n
	ON CONFLICT DO NOTHING`

// lockOutbox takes the outbox lock shared in tx, before tx inserts events,
// and returns the transaction's now(): the time its rows' defaults hold.
func lockOutbox(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	var now time.Time
	err := tx.QueryRow(ctx, lockOutboxSQL, outboxLockKey).Scan(&now)
	return now.UTC(), err
}

// lockOutboxSQL is lockOutbox's statement, with outboxLockKey.
const lockOutboxSQL = `SELECT now() FROM (SELECT pg_advisory_xact_lock_shared($1)) AS l`

// insertEventRows writes evs inside tx, which holds the outbox lock (see
// lockOutbox), and reports how many rows it wrote.
func insertEventRows(ctx context.Context, tx pgx.Tx, evs []store.Event) (int64, error) {
	tag, err := tx.Exec(ctx, insertEvents, eventArrays(evs)...)
	return tag.RowsAffected(), err
}

// eventArrays returns insertEvents' arguments for evs.
func eventArrays(evs []store.Event) []any {
	n := len(evs)
	ids, types, promos, claims, data := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ats := make([]time.Time, n)
	for i, e := range evs {
		ids[i], types[i], ats[i], promos[i], claims[i], data[i] = e.ID, e.Type, pgTime(e.At), e.PromotionID, e.ClaimID, sqlstore.EventData(e)
	}
	return []any{ids, types, ats, promos, claims, data}
}

// writeEvents takes the outbox lock and writes evs, inside tx; it reports
// how many rows it wrote.
func writeEvents(ctx context.Context, tx pgx.Tx, evs []store.Event) (int64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	if _, err := lockOutbox(ctx, tx); err != nil {
		return 0, err
	}
	return insertEventRows(ctx, tx, evs)
}

// AppendPromotionEvent writes the promotion event e unless its id is
// written already.
func (s *Store) AppendPromotionEvent(ctx context.Context, e store.Event) (bool, error) {
	if err := sqlstore.CheckPromotionEvent(e); err != nil {
		return false, fmt.Errorf("postgres: append event: %w", err)
	}
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		n, err = writeEvents(ctx, tx, []store.Event{e})
		return err
	})
	return n > 0, wrapErr("append event "+e.ID, err)
}

// Events returns up to limit events with seq > afterSeq of the types (all
// if none), in seq order, up to the horizon below which every transaction
// that wrote events has ended (see outboxLockKey).
func (s *Store) Events(ctx context.Context, afterSeq int64, types []string, limit int) ([]store.Event, error) {
	if limit <= 0 {
		return nil, nil
	}
	// Nothing committed past afterSeq: nothing to serve, and no need to
	// wait for the writers in flight.
	var head int64
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(max(seq), 0) FROM events`).Scan(&head); err != nil {
		return nil, wrapErr("events", err)
	}
	if head <= afterSeq {
		return nil, nil
	}
	var horizon int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+feedLockTimeout+`'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, outboxLockKey); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT COALESCE(max(seq), 0) FROM events`).Scan(&horizon)
	})
	if err != nil {
		return nil, wrapErr("events", err)
	}
	if horizon <= afterSeq {
		return nil, nil
	}
	var ts []string // NULL: every type
	if len(types) > 0 {
		ts = types
	}
	rows, err := s.pool.Query(ctx, `SELECT `+sqlstore.EventCols("data::text")+` FROM events
		WHERE seq > $1 AND seq <= $2 AND ($3::text[] IS NULL OR type = ANY($3::text[]))
		ORDER BY seq LIMIT $4`, afterSeq, horizon, ts, limit)
	if err != nil {
		return nil, wrapErr("events", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Event, error) {
		return sqlstore.ScanEvent(row, pgTimes)
	})
	return out, wrapErr("events", err)
}

// EventHead returns the highest seq visible, 0 with none.
func (s *Store) EventHead(ctx context.Context) (int64, error) {
	var head int64
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(max(seq), 0) FROM events`).Scan(&head)
	return head, wrapErr("event head", err)
}

// LeaseEvents takes or renews subscriber's lease for owner, measured by
// the database's clock, so the instances' clocks need not agree.
func (s *Store) LeaseEvents(ctx context.Context, subscriber, owner string, ttl time.Duration) (int64, bool, error) {
	var seq int64
	err := s.pool.QueryRow(ctx, `INSERT INTO event_cursors (subscriber, seq, owner, lease_until)
		VALUES ($1, 0, $2, now() + $3 * interval '1 microsecond')
		ON CONFLICT (subscriber) DO UPDATE SET owner = $2, lease_until = EXCLUDED.lease_until
		WHERE event_cursors.owner = $2 OR event_cursors.lease_until < now()
		RETURNING seq`, subscriber, owner, ttl.Microseconds()).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, wrapErr("lease events of "+subscriber, err)
	}
	return seq, true, nil
}

// SetEventCursor moves subscriber's cursor up to seq if owner holds the
// lease.
func (s *Store) SetEventCursor(ctx context.Context, subscriber, owner string, seq int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE event_cursors SET seq = GREATEST(seq, $3)
		WHERE subscriber = $1 AND owner = $2 AND lease_until >= now()`, subscriber, owner, seq)
	if err != nil {
		return false, wrapErr("set event cursor of "+subscriber, err)
	}
	return tag.RowsAffected() > 0, nil
}

// ReleaseEvents ends owner's lease of subscriber.
func (s *Store) ReleaseEvents(ctx context.Context, subscriber, owner string) error {
	_, err := s.pool.Exec(ctx, `UPDATE event_cursors SET lease_until = '-infinity'
		WHERE subscriber = $1 AND owner = $2`, subscriber, owner)
	return wrapErr("release events of "+subscriber, err)
}

// PruneEvents deletes up to limit events older than before that every
// one of subscribers passed, oldest first.
func (s *Store) PruneEvents(ctx context.Context, before time.Time, subscribers []string, limit int) (int64, error) {
	if limit <= 0 {
		return 0, nil
	}
	var subs []string // NULL: age alone decides
	if len(subscribers) > 0 {
		subs = subscribers
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM events WHERE seq IN (
		SELECT seq FROM events WHERE at < $1
		  AND ($2::text[] IS NULL OR seq <= (SELECT CASE WHEN count(*) = $3 THEN min(seq) ELSE 0 END
			FROM event_cursors WHERE subscriber = ANY($2::text[])))
		ORDER BY seq LIMIT $4)`, pgTime(before), subs, len(subscribers), limit)
	if err != nil {
		return 0, wrapErr("prune events", err)
	}
	return tag.RowsAffected(), nil
}
