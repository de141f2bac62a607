package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/internal/sqlstore"
)

// insertEvents writes events as one JSON array parameter (one statement
// text whatever the row count); a promotion event written already is
// skipped (events_promotion). Rows are inserted in array order, so their
// seqs follow it.
const insertEvents = `INSERT INTO events (id, type, at, promotion_id, claim_id, data)
	SELECT j.value->>0, j.value->>1, j.value->>2, j.value->>3, NULLIF(j.value->>4, ''), j.value->>5
	FROM json_each(?) j WHERE true
	ON CONFLICT DO NOTHING`

// eventsArg is the parameter of insertEvents.
func eventsArg(evs []store.Event) (string, error) {
	arr := make([][]any, len(evs))
	for i, e := range evs {
		arr[i] = []any{e.ID, e.Type, fmtTime(e.At), e.PromotionID, e.ClaimID, sqlstore.EventData(e)}
	}
	b, err := json.Marshal(arr)
	return string(b), err
}

// writeEvents writes evs inside tx.
func writeEvents(ctx context.Context, tx *sql.Tx, evs []store.Event) error {
	if len(evs) == 0 {
		return nil
	}
	arg, err := eventsArg(evs)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, insertEvents, arg)
	return err
}

// AppendPromotionEvent writes the promotion event e unless its id is
// written already.
func (s *Store) AppendPromotionEvent(ctx context.Context, e store.Event) (bool, error) {
	if err := sqlstore.CheckPromotionEvent(e); err != nil {
		return false, fmt.Errorf("sqlite: append event: %w", err)
	}
	arg, err := eventsArg([]store.Event{e})
	if err != nil {
		return false, fmt.Errorf("sqlite: append event: %w", err)
	}
	res, err := s.w.ExecContext(ctx, insertEvents, arg)
	if err != nil {
		return false, wrapErr("append event "+e.ID, err)
	}
	n, err := res.RowsAffected()
	return n > 0, wrapErr("append event "+e.ID, err)
}

// Events returns up to limit events with seq > afterSeq of the types (all
// if none), in seq order. SQLite has one writer, and seqs are handed out
// in commit order: a reader never sees a seq above one still to commit.
func (s *Store) Events(ctx context.Context, afterSeq int64, types []string, limit int) ([]store.Event, error) {
	if limit <= 0 {
		return nil, nil
	}
	var ts any // NULL: every type
	if len(types) > 0 {
		b, err := json.Marshal(types)
		if err != nil {
			return nil, fmt.Errorf("sqlite: events: %w", err)
		}
		ts = string(b)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+sqlstore.EventCols("data")+` FROM events
		WHERE seq > ?1 AND (?2 IS NULL OR type IN (SELECT value FROM json_each(?2)))
		ORDER BY seq LIMIT ?3`, afterSeq, ts, limit)
	if err != nil {
		return nil, wrapErr("events", err)
	}
	defer rows.Close()
	out, err := sqlstore.Collect(rows, func(row sqlstore.Scanner) (store.Event, error) {
		return sqlstore.ScanEvent(row, liteTimes)
	})
	return out, wrapErr("events", err)
}

// EventHead returns the highest seq written, 0 with none.
func (s *Store) EventHead(ctx context.Context) (int64, error) {
	var head int64
	err := s.r.QueryRowContext(ctx, `SELECT COALESCE(max(seq), 0) FROM events`).Scan(&head)
	return head, wrapErr("event head", err)
}

// LeaseEvents takes or renews subscriber's lease for owner, measured by
// this process's clock (SQLite's writers share a machine).
func (s *Store) LeaseEvents(ctx context.Context, subscriber, owner string, ttl time.Duration) (int64, bool, error) {
	now := time.Now()
	var seq int64
	err := s.w.QueryRowContext(ctx, `INSERT INTO event_cursors (subscriber, seq, owner, lease_until)
		VALUES (?1, 0, ?2, ?3)
		ON CONFLICT (subscriber) DO UPDATE SET owner = ?2, lease_until = ?3
		WHERE event_cursors.owner = ?2 OR event_cursors.lease_until < ?4
		RETURNING seq`, subscriber, owner, fmtTime(now.Add(ttl)), fmtTime(now)).Scan(&seq)
	if err == sql.ErrNoRows {
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
	res, err := s.w.ExecContext(ctx, `UPDATE event_cursors SET seq = max(seq, ?3)
		WHERE subscriber = ?1 AND owner = ?2 AND lease_until >= ?4`, subscriber, owner, seq, fmtTime(time.Now()))
	if err != nil {
		return false, wrapErr("set event cursor of "+subscriber, err)
	}
	n, err := res.RowsAffected()
	return n > 0, wrapErr("set event cursor of "+subscriber, err)
}

// ReleaseEvents ends owner's lease of subscriber.
func (s *Store) ReleaseEvents(ctx context.Context, subscriber, owner string) error {
	_, err := s.w.ExecContext(ctx, `UPDATE event_cursors SET lease_until = ''
		WHERE subscriber = ? AND owner = ?`, subscriber, owner)
	return wrapErr("release events of "+subscriber, err)
}

// PruneEvents deletes up to limit events older than before that every
// one of subscribers passed, oldest first.
func (s *Store) PruneEvents(ctx context.Context, before time.Time, subscribers []string, limit int) (int64, error) {
	if limit <= 0 {
		return 0, nil
	}
	var subs any // NULL: age alone decides
	if len(subscribers) > 0 {
		b, err := json.Marshal(subscribers)
		if err != nil {
			return 0, fmt.Errorf("sqlite: prune events: %w", err)
		}
		subs = string(b)
	}
	res, err := s.w.ExecContext(ctx, `DELETE FROM events WHERE seq IN (
		SELECT seq FROM events WHERE at < ?1
		  AND (?2 IS NULL OR seq <= (SELECT CASE WHEN count(*) = ?3 THEN min(seq) ELSE 0 END
			FROM event_cursors WHERE subscriber IN (SELECT value FROM json_each(?2))))
		ORDER BY seq LIMIT ?4)`, fmtTime(before), subs, len(subscribers), limit)
	if err != nil {
		return 0, wrapErr("prune events", err)
	}
	n, err := res.RowsAffected()
	return n, wrapErr("prune events", err)
}
