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

// insertEvents writes events; a promotion event written already is skipped
// (events_promotion; OR IGNORE as insertIssued explains). Rows are inserted
// in order, so their seqs follow it.
var insertEvents = &multiInsert{text: func(n int) string {
	return valuesSQL(`INSERT OR IGNORE INTO events (id, type, at, promotion_id, claim_id, data) VALUES `, 6, n, ``)
}}

// writeEvents writes evs inside tx, in pieces of insertRows, through the
// prepared statements of c (a nil c, outside the group writer, runs them
// unprepared).
func (c *insertStmts) writeEvents(ctx context.Context, tx *sql.Tx, evs []store.Event) error {
	_, err := c.insertEvents(ctx, tx, evs)
	return err
}

// insertEvents is writeEvents reporting the rows written.
func (c *insertStmts) insertEvents(ctx context.Context, tx *sql.Tx, evs []store.Event) (int64, error) {
	var written int64
	args := make([]any, 0, insertRows(len(evs))*6)
	err := pieces(len(evs), func(start, end int) error {
		args = args[:0]
		for _, e := range evs[start:end] {
			var claim any // NULL: a promotion event
			if e.ClaimID != "" {
				claim = e.ClaimID
			}
			args = append(args, e.ID, e.Type, fmtTime(e.At), e.PromotionID, claim, sqlstore.EventData(e))
		}
		n, err := c.exec(ctx, tx, insertEvents, end-start, args)
		written += n
		return err
	})
	return written, err
}

// writeEvents writes evs inside tx, unprepared: for the transactions
// outside the group writer.
func writeEvents(ctx context.Context, tx *sql.Tx, evs []store.Event) error {
	return (*insertStmts)(nil).writeEvents(ctx, tx, evs)
}

// AppendPromotionEvent writes the promotion event e unless its id is
// written already.
func (s *Store) AppendPromotionEvent(ctx context.Context, e store.Event) (bool, error) {
	if err := sqlstore.CheckPromotionEvent(e); err != nil {
		return false, fmt.Errorf("sqlite: append event: %w", err)
	}
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = (*insertStmts)(nil).insertEvents(ctx, tx, []store.Event{e})
		return err
	})
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
