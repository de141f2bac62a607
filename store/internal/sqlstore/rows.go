package sqlstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dibsio/dibs/store"
)

// Scanner is one result row: *sql.Row, *sql.Rows, pgx.Row and
// pgx.CollectableRow all are.
type Scanner interface {
	Scan(dest ...any) error
}

// Rows is a result set being walked: *sql.Rows and pgx.Rows both are.
type Rows interface {
	Scanner
	Next() bool
	Err() error
}

// Times is how a backend stores times. T is the type a NOT NULL time column
// is sent and scanned as, N the type of a nullable one.
type Times[T, N any] struct {
	// Encode turns a time into the value sent for a NOT NULL column.
	Encode func(time.Time) T
	// EncodeNull sends the zero time as NULL.
	EncodeNull func(time.Time) N
	// Decode reads a NOT NULL column back, in UTC.
	Decode func(T) (time.Time, error)
	// DecodeNull reads NULL back as the zero time.
	DecodeNull func(N) (time.Time, error)
}

// PromotionCols is the column list every promotion query selects and
// CreatePromotion inserts, in the order [ScanPromotion] reads and
// [PromotionArgs] writes. The column held is store.Promotion.Paused, the
// admin's pause, under the name it was created with: renaming a column
// would take a migration on both backends for no change in behaviour.
const PromotionCols = `id, name, mode, kind, stock, per_user_limit, value,
	starts_at, ends_at, closed_at, created_at,
	waiting_room_enabled, waiting_room_admit_per_second, waiting_room_entry_ttl_seconds,
	drained, waiting_room_abandon_after_seconds, waiting_room_prequeue_seconds,
	waiting_room_prequeue_seed, archived_at, webhook_url, held, revoke_returns_stock,
	drained_at, retired_at, expected_claims_per_second, segments,
	waiting_room_max_active, waiting_room_message, waiting_room_pow_difficulty, waiting_room_page`

// PromotionPlaceholders is the VALUES list of an insert of [PromotionCols]:
// one placeholder per column, made by ph from its 1-based position (so it
// follows the column list as it grows).
func PromotionPlaceholders(ph func(i int) string) string {
	n := strings.Count(PromotionCols, ",") + 1
	out := make([]string, n)
	for i := range out {
		out[i] = ph(i + 1)
	}
	return strings.Join(out, ", ")
}

// PromotionArgs returns p's values in [PromotionCols] order. A zero
// CreatedAt goes out as NULL: the backend fills it in.
func PromotionArgs[T, N any](p store.Promotion, tc Times[T, N]) []any {
	return []any{
		p.ID, p.Name, p.Mode, p.Kind, p.Stock, p.PerUserLimit, p.Value,
		tc.Encode(p.StartsAt), tc.Encode(p.EndsAt), tc.EncodeNull(p.ClosedAt), tc.EncodeNull(p.CreatedAt),
		p.WaitingRoom.Enabled, p.WaitingRoom.AdmitPerSecond, p.WaitingRoom.EntryTTLSeconds,
		p.Drained, p.WaitingRoom.AbandonAfterSeconds, p.WaitingRoom.PrequeueSeconds,
		p.WaitingRoom.PrequeueSeed, tc.EncodeNull(p.ArchivedAt), p.WebhookURL, p.Paused, p.RevokeReturnsStock,
		tc.EncodeNull(p.DrainedAt), tc.EncodeNull(p.RetiredAt), p.ExpectedClaimsPerSecond, max(p.Segments, 1),
		p.WaitingRoom.MaxActive, p.WaitingRoom.Message, p.WaitingRoom.PowDifficulty,
		EncodeRoomPage(p.WaitingRoom.Page),
	}
}

// EncodeRoomPage is the text of the waiting_room_page column: the JSON of
// page, or "" for none.
func EncodeRoomPage(page *store.RoomPage) string {
	if page == nil {
		return ""
	}
	b, err := json.Marshal(page)
	if err != nil {
		panic(fmt.Sprintf("sqlstore: encode a room page: %v", err)) // strings and a map of strings always encode
	}
	return string(b)
}

// DecodeRoomPage reads the waiting_room_page column back: nil for "".
func DecodeRoomPage(s string) (*store.RoomPage, error) {
	if s == "" {
		return nil, nil
	}
	var page store.RoomPage
	if err := json.Unmarshal([]byte(s), &page); err != nil {
		return nil, fmt.Errorf("decode waiting_room_page: %w", err)
	}
	return &page, nil
}

// ScanPromotion reads a row of [PromotionCols].
func ScanPromotion[T, N any](row Scanner, tc Times[T, N]) (store.Promotion, error) {
	var (
		p                     store.Promotion
		starts, ends, created T
		closed, archived      N
		drained, retired      N
		page                  string
	)
	if err := row.Scan(&p.ID, &p.Name, &p.Mode, &p.Kind, &p.Stock, &p.PerUserLimit, &p.Value,
		&starts, &ends, &closed, &created,
		&p.WaitingRoom.Enabled, &p.WaitingRoom.AdmitPerSecond, &p.WaitingRoom.EntryTTLSeconds,
		&p.Drained, &p.WaitingRoom.AbandonAfterSeconds, &p.WaitingRoom.PrequeueSeconds,
		&p.WaitingRoom.PrequeueSeed, &archived, &p.WebhookURL, &p.Paused, &p.RevokeReturnsStock,
		&drained, &retired, &p.ExpectedClaimsPerSecond, &p.Segments,
		&p.WaitingRoom.MaxActive, &p.WaitingRoom.Message, &p.WaitingRoom.PowDifficulty, &page); err != nil {
		return store.Promotion{}, err
	}
	var err error
	if p.StartsAt, err = tc.Decode(starts); err != nil {
		return store.Promotion{}, err
	}
	if p.EndsAt, err = tc.Decode(ends); err != nil {
		return store.Promotion{}, err
	}
	if p.ClosedAt, err = tc.DecodeNull(closed); err != nil {
		return store.Promotion{}, err
	}
	if p.CreatedAt, err = tc.Decode(created); err != nil {
		return store.Promotion{}, err
	}
	if p.ArchivedAt, err = tc.DecodeNull(archived); err != nil {
		return store.Promotion{}, err
	}
	if p.DrainedAt, err = tc.DecodeNull(drained); err != nil {
		return store.Promotion{}, err
	}
	if p.RetiredAt, err = tc.DecodeNull(retired); err != nil {
		return store.Promotion{}, err
	}
	if p.WaitingRoom.Page, err = DecodeRoomPage(page); err != nil {
		return store.Promotion{}, err
	}
	return p, nil
}

// ScanDeadLetter reads a row of claim_id, promotion_id, user_id, rank, slot,
// reason, deliveries, state, at and fields, the fields as JSON text.
func ScanDeadLetter[T, N any](row Scanner, tc Times[T, N]) (store.DeadLetter, error) {
	var (
		d      store.DeadLetter
		at     T
		fields string
	)
	if err := row.Scan(&d.ClaimID, &d.PromotionID, &d.UserID, &d.Rank, &d.Slot,
		&d.Reason, &d.Deliveries, &d.State, &at, &fields); err != nil {
		return store.DeadLetter{}, err
	}
	var err error
	if d.At, err = tc.Decode(at); err != nil {
		return store.DeadLetter{}, err
	}
	if d.Fields, err = DecodeFields(fields); err != nil {
		return store.DeadLetter{}, err
	}
	return d, nil
}

// ScanKnownClaim reads a row of claim_id, rank, user_id, slot, state, at and
// fields, the fields as JSON text. at is read as a nullable time: NULL, or
// a time the backend cannot decode, leaves At zero rather than failing the
// row, so one unreadable time never stops a rebuild.
func ScanKnownClaim[T, N any](row Scanner, tc Times[T, N]) (store.KnownClaim, error) {
	var (
		c      store.KnownClaim
		at     N
		fields string
	)
	if err := row.Scan(&c.ClaimID, &c.Rank, &c.UserID, &c.Slot, &c.State, &at, &fields); err != nil {
		return store.KnownClaim{}, err
	}
	if t, err := tc.DecodeNull(at); err == nil {
		c.At = t
	}
	var err error
	if c.Fields, err = DecodeFields(fields); err != nil {
		return store.KnownClaim{}, err
	}
	return c, nil
}

// ScanIssued reads a row of [IssuedCols].
func ScanIssued[T, N any](row Scanner, tc Times[T, N]) (store.Issued, error) {
	var (
		is               store.Issued
		accepted, issued T
		expires, revoked N
	)
	if err := row.Scan(&is.ClaimID, &is.PromotionID, &is.UserID, &is.Rank, &is.Slot, &accepted, &issued,
		&is.Grant.Code, &is.Grant.Value, &expires, &is.Grant.Points, &revoked, &is.RevokeReturned); err != nil {
		return store.Issued{}, err
	}
	var err error
	if is.AcceptedAt, err = tc.Decode(accepted); err != nil {
		return store.Issued{}, err
	}
	if is.IssuedAt, err = tc.Decode(issued); err != nil {
		return store.Issued{}, err
	}
	if is.Grant.ExpiresAt, err = tc.DecodeNull(expires); err != nil {
		return store.Issued{}, err
	}
	if is.RevokedAt, err = tc.DecodeNull(revoked); err != nil {
		return store.Issued{}, err
	}
	return is, nil
}

// Collect scans every row with scan. It does not close rows.
func Collect[R any](rows Rows, scan func(Scanner) (R, error)) ([]R, error) {
	var out []R
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
