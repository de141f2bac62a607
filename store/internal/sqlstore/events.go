package sqlstore

import (
	"encoding/json"
	"fmt"
	"time"

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
	b, err := json.Marshal(d)
	if err != nil {
		return store.Event{}, fmt.Errorf("event %s of %s: %w", typ, d.ClaimID, err)
	}
	return store.Event{ID: store.EventID(typ, subject), Type: typ, At: at.UTC(),
		PromotionID: d.PromotionID, ClaimID: d.ClaimID, Data: b}, nil
}

// IssueEvents returns the events of the issues just inserted, issued at
// issuedAt: claim.accepted (at the acceptance time) and claim.issued of
// each, in batch order. Their ids come from the claim id, so a claim
// written again (a Duplicate) would have the same ones.
func IssueEvents(inserted []store.Issue, issuedAt time.Time) ([]store.Event, error) {
	out := make([]store.Event, 0, 2*len(inserted))
	for _, is := range inserted {
		d := claimData{ClaimID: is.ClaimID, PromotionID: is.PromotionID, UserID: is.UserID,
			Rank: is.Rank, Slot: is.Slot, AcceptedAt: fmtEventTime(is.AcceptedAt)}
		acc, err := claimEvent(store.EventClaimAccepted, is.ClaimID, is.AcceptedAt, d)
		if err != nil {
			return nil, err
		}
		d.IssuedAt, d.Points, d.HasCode = fmtEventTime(issuedAt), is.Grant.Points, is.Grant.Code != ""
		iss, err := claimEvent(store.EventClaimIssued, is.ClaimID, issuedAt, d)
		if err != nil {
			return nil, err
		}
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
