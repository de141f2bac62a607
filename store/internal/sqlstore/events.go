package sqlstore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dibsio/dibs/internal/jsontext"
	"github.com/dibsio/dibs/store"
)

// claimData is the Data of a claim event.
type claimData struct {
	ClaimID     string `json:"claim_id"`
	PromotionID string `json:"promotion_id"`
	UserID      string `json:"user_id"`
	Rank        int64  `json:"rank"`
	Slot        int    `json:"slot"`
	AcceptedAt  string `json:"accepted_at,omitempty"`
	IssuedAt    string `json:"issued_at,omitempty"`
	Points      int64  `json:"points,omitempty"`
	HasCode     bool   `json:"has_code,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Deliveries  int64  `json:"deliveries,omitempty"`
}

func fmtEventTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
}

func claimEvent(typ, subject string, at time.Time, d claimData) (store.Event, error) {
	return claimEventIn(nil, typ, subject, at, d), nil
}

// claimEventIn is claimEvent with its data appended to *buf, which it
// advances past them: the events of a batch share one buffer.
func claimEventIn(buf *[]byte, typ, subject string, at time.Time, d claimData) store.Event {
	var b []byte
	if buf != nil {
		b = *buf
	}
	start := len(b)
	b = d.appendJSON(b)
	if buf != nil {
		*buf = b[len(b):len(b):cap(b)]
	}
	return store.Event{ID: store.EventID(typ, subject), Type: typ, At: at.UTC(),
		PromotionID: d.PromotionID, ClaimID: d.ClaimID, Data: b[start:len(b):len(b)]}
}

// claimDataSize is about what the data of an issue's two events take
// beyond their ids: the names, the numbers, the times.
const claimDataSize = 320

// appendJSON appends d as json.Marshal encodes it, byte for byte, without
// reflection: the issuer writes two claim events per claim.
func (d claimData) appendJSON(b []byte) []byte {
	b = append(b, `{"claim_id":`...)
	b = jsontext.AppendString(b, d.ClaimID)
	b = append(b, `,"promotion_id":`...)
	b = jsontext.AppendString(b, d.PromotionID)
	b = append(b, `,"user_id":`...)
	b = jsontext.AppendString(b, d.UserID)
	b = append(b, `,"rank":`...)
	b = strconv.AppendInt(b, d.Rank, 10)
	b = append(b, `,"slot":`...)
	b = strconv.AppendInt(b, int64(d.Slot), 10)
	if d.AcceptedAt != "" {
		b = append(b, `,"accepted_at":`...)
		b = jsontext.AppendString(b, d.AcceptedAt)
	}
	if d.IssuedAt != "" {
		b = append(b, `,"issued_at":`...)
		b = jsontext.AppendString(b, d.IssuedAt)
	}
	if d.Points != 0 {
		b = append(b, `,"points":`...)
		b = strconv.AppendInt(b, d.Points, 10)
	}
	if d.HasCode {
		b = append(b, `,"has_code":true`...)
	}
	if d.Reason != "" {
		b = append(b, `,"reason":`...)
		b = jsontext.AppendString(b, d.Reason)
	}
	if d.Deliveries != 0 {
		b = append(b, `,"deliveries":`...)
		b = strconv.AppendInt(b, d.Deliveries, 10)
	}
	return append(b, '}')
}

// IssueEvents returns the events of the issues just inserted, issued at
// issuedAt: claim.accepted (at the acceptance time) and claim.issued of
// each, in batch order. Their ids come from the claim id, so a claim
// written again (a Duplicate) would have the same ones.
func IssueEvents(inserted []store.Issue, issuedAt time.Time) ([]store.Event, error) {
	out := make([]store.Event, 0, 2*len(inserted))
	size := 0
	for _, is := range inserted {
		size += 2*(len(is.ClaimID)+len(is.PromotionID)+len(is.UserID)) + claimDataSize
	}
	buf := make([]byte, 0, size)
	issued := fmtEventTime(issuedAt)
	for _, is := range inserted {
		d := claimData{ClaimID: is.ClaimID, PromotionID: is.PromotionID, UserID: is.UserID,
			Rank: is.Rank, Slot: is.Slot, AcceptedAt: fmtEventTime(is.AcceptedAt)}
		acc := claimEventIn(&buf, store.EventClaimAccepted, is.ClaimID, is.AcceptedAt, d)
		d.IssuedAt, d.Points, d.HasCode = issued, is.Grant.Points, is.Grant.Code != ""
		iss := claimEventIn(&buf, store.EventClaimIssued, is.ClaimID, issuedAt, d)
		out = append(out, acc, iss)
	}
	return out, nil
}

// FailedEvent returns the claim.failed event of dead letter d. replayedAt
// is when the claim was last replayed (zero if never): each failure after
// a replay is an event of its own, and a failure recorded twice is one.
func FailedEvent(d store.DeadLetter, replayedAt time.Time) (store.Event, error) {
	subject := d.ClaimID
	if !replayedAt.IsZero() {
		subject += "@" + fmtEventTime(replayedAt)
	}
	return claimEvent(store.EventClaimFailed, subject, d.At, claimData{ClaimID: d.ClaimID,
		PromotionID: d.PromotionID, UserID: d.UserID, Rank: d.Rank, Slot: d.Slot,
		Reason: d.Reason, Deliveries: d.Deliveries})
}

// VoidEvents returns the claim.voided events of the dead letters just
// voided, at at.
func VoidEvents(voided []store.DeadLetter, at time.Time) ([]store.Event, error) {
	out := make([]store.Event, 0, len(voided))
	for _, d := range voided {
		e, err := claimEvent(store.EventClaimVoided, d.ClaimID, at, claimData{ClaimID: d.ClaimID,
			PromotionID: d.PromotionID, UserID: d.UserID, Rank: d.Rank, Slot: d.Slot, Reason: d.Reason})
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// CheckPromotionEvent reports an error unless e is a promotion event with
// its id: EventID(e.Type, e.PromotionID).
func CheckPromotionEvent(e store.Event) error {
	switch e.Type {
	case store.EventPromotionOpened, store.EventPromotionSoldOut, store.EventPromotionEnded:
	default:
		return fmt.Errorf("event type %q is not a promotion event", e.Type)
	}
	if e.ID != store.EventID(e.Type, e.PromotionID) {
		return fmt.Errorf("event id %q is not EventID(%q, %q)", e.ID, e.Type, e.PromotionID)
	}
	return nil
}

// EventData is e's Data, or {} if it has none.
func EventData(e store.Event) string {
	if len(e.Data) == 0 {
		return "{}"
	}
	return string(e.Data)
}

// EventCols is the column list every event query selects, in the order
// [ScanEvent] reads, with data, the backend's expression of the data
// column as JSON text.
func EventCols(data string) string {
	return `seq, id, type, at, promotion_id, COALESCE(claim_id, ''), ` + data
}

// ScanEvent reads a row of [EventCols].
func ScanEvent[T, N any](row Scanner, tc Times[T, N]) (store.Event, error) {
	var (
		e    store.Event
		at   T
		data string
	)
	if err := row.Scan(&e.Seq, &e.ID, &e.Type, &at, &e.PromotionID, &e.ClaimID, &data); err != nil {
		return store.Event{}, err
	}
	var err error
	if e.At, err = tc.Decode(at); err != nil {
		return store.Event{}, err
	}
	e.Data = json.RawMessage(data)
	return e, nil
}

// revokedData is the Data of a claim.revoked event.
type revokedData struct {
	claimData
	RevokedAt       string `json:"revoked_at"`
	ReturnedToStock bool   `json:"returned_to_stock"`
}

// RevokeEvents returns the claim.revoked events of the claims just
// revoked, at their RevokedAt, under the ids EventID(claim.revoked, claim
// id): a claim is revoked once, so it has one.
func RevokeEvents(revoked []store.Issued) ([]store.Event, error) {
	out := make([]store.Event, 0, len(revoked))
	for _, is := range revoked {
		d := revokedData{
			claimData: claimData{ClaimID: is.ClaimID, PromotionID: is.PromotionID, UserID: is.UserID,
				Rank: is.Rank, Slot: is.Slot, AcceptedAt: fmtEventTime(is.AcceptedAt),
				IssuedAt: fmtEventTime(is.IssuedAt), Points: is.Grant.Points, HasCode: is.Grant.Code != ""},
			RevokedAt: fmtEventTime(is.RevokedAt), ReturnedToStock: is.RevokeReturned,
		}
		b, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("event %s of %s: %w", store.EventClaimRevoked, is.ClaimID, err)
		}
		out = append(out, store.Event{ID: store.EventID(store.EventClaimRevoked, is.ClaimID),
			Type: store.EventClaimRevoked, At: is.RevokedAt.UTC(), PromotionID: is.PromotionID,
			ClaimID: is.ClaimID, Data: b})
	}
	return out, nil
}

// fieldChange is one changed field of a promotion.changed event.
type fieldChange struct {
	Old any `json:"old"`
	New any `json:"new"`
}

// changedData is the Data of a promotion.changed event.
type changedData struct {
	PromotionID string                 `json:"promotion_id"`
	Changes     map[string]fieldChange `json:"changes"`
}

// ChangeEvent returns the promotion.changed event of a change at at that
// made before into after, and whether any field changed (without a
// change there is no event). Its data names each changed field as the
// HTTP API does (name, stock, ends_at, paused, revoke_returns_stock) with
// its old and new value; its id is made from the promotion, at and the
// data, so the same change written twice has one id.
func ChangeEvent(before, after store.Promotion, at time.Time) (store.Event, bool, error) {
	ch := map[string]fieldChange{}
	if before.Name != after.Name {
		ch["name"] = fieldChange{before.Name, after.Name}
	}
	if before.Stock != after.Stock {
		ch["stock"] = fieldChange{before.Stock, after.Stock}
	}
	if !before.EndsAt.Equal(after.EndsAt) {
		ch["ends_at"] = fieldChange{fmtEventTime(before.EndsAt), fmtEventTime(after.EndsAt)}
	}
	if before.Paused != after.Paused {
		ch["paused"] = fieldChange{before.Paused, after.Paused}
	}
	if before.RevokeReturnsStock != after.RevokeReturnsStock {
		ch["revoke_returns_stock"] = fieldChange{before.RevokeReturnsStock, after.RevokeReturnsStock}
	}
	roomChanges(ch, before.WaitingRoom, after.WaitingRoom)
	if len(ch) == 0 {
		return store.Event{}, false, nil
	}
	b, err := json.Marshal(changedData{PromotionID: after.ID, Changes: ch}) // map keys sorted: the same change, the same bytes
	if err != nil {
		return store.Event{}, false, fmt.Errorf("event %s of %s: %w", store.EventPromotionChanged, after.ID, err)
	}
	subject := after.ID + "@" + fmtEventTime(at) + "\x00" + string(b)
	return store.Event{ID: store.EventID(store.EventPromotionChanged, subject), Type: store.EventPromotionChanged,
		At: at.UTC(), PromotionID: after.ID, Data: b}, true, nil
}

// roomChanges adds to ch the waiting-room levers (and the queue page's
// setting) that differ between before and after, named
// waiting_room.<field>.
func roomChanges(ch map[string]fieldChange, before, after store.WaitingRoom) {
	if before.AdmitPerSecond != after.AdmitPerSecond {
		ch["waiting_room.admit_per_second"] = fieldChange{before.AdmitPerSecond, after.AdmitPerSecond}
	}
	if before.MaxActive != after.MaxActive {
		ch["waiting_room.max_active"] = fieldChange{before.MaxActive, after.MaxActive}
	}
	if before.Message != after.Message {
		ch["waiting_room.message"] = fieldChange{before.Message, after.Message}
	}
	if before.PowDifficulty != after.PowDifficulty {
		ch["waiting_room.pow_difficulty"] = fieldChange{before.PowDifficulty, after.PowDifficulty}
	}
	if EncodeRoomPage(before.Page) != EncodeRoomPage(after.Page) {
		ch["waiting_room.page"] = fieldChange{before.Page, after.Page} // an object, or null for the defaults
	}
}

// ErasedEvent is the rewrite of one claim event of an erased user.
type ErasedEvent struct {
	Seq        int64
	ID         string // the new event id
	NewClaimID string
	Data       string // the new data, JSON text
}

// ErasableEventCols is the column list [ScanErasedEvent] reads, with data,
// the backend's expression of the data column as JSON text.
func ErasableEventCols(data string) string {
	return `seq, id, type, promotion_id, claim_id, ` + data
}

// ScanErasedEvent reads a row of [ErasableEventCols], a claim event of
// userID, and returns its rewrite for EraseUser (see EraseEvent).
func ScanErasedEvent(row Scanner, userID, erased string) (ErasedEvent, error) {
	var (
		seq                     int64
		id, typ, pid, cid, data string
	)
	if err := row.Scan(&seq, &id, &typ, &pid, &cid, &data); err != nil {
		return ErasedEvent{}, err
	}
	return EraseEvent(seq, id, typ, pid, cid, data, userID, erased)
}

// EraseEvent returns the rewrite of a claim event of userID (seq, id, type,
// promotion, claim id and data as stored) for EraseUser: its claim id
// rewritten by ErasedClaimID, in the column and the data; every string in
// the data equal to userID (its user_id) replaced by erased; and, where
// the claim id carried the user, its id made anew from the old one and
// erased, since the old one is a hash of the claim id.
func EraseEvent(seq int64, id, typ, promotionID, claimID, data, userID, erased string) (ErasedEvent, error) {
	var d map[string]any
	dec := json.NewDecoder(strings.NewReader(data))
	dec.UseNumber() // numbers are kept as written
	if err := dec.Decode(&d); err != nil {
		return ErasedEvent{}, fmt.Errorf("event %d data: %w", seq, err)
	}
	newClaim := ErasedClaimID(claimID, promotionID, userID, erased)
	for k, v := range d {
		switch s, _ := v.(string); {
		case s == userID:
			d[k] = erased
		case k == "claim_id":
			d[k] = ErasedClaimID(s, promotionID, userID, erased)
		}
	}
	b, err := json.Marshal(d)
	if err != nil {
		return ErasedEvent{}, fmt.Errorf("event %d data: %w", seq, err)
	}
	if newClaim != claimID {
		id = store.EventID(typ, id+"\x00"+erased)
	}
	return ErasedEvent{Seq: seq, ID: id, NewClaimID: newClaim, Data: string(b)}, nil
}
