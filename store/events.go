package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Event types: what an [Event] reports.
const (
	// EventClaimAccepted: a claim was accepted. Acceptance happens in
	// Redis; the database first learns of a claim when it is issued, so
	// this event is written in the transaction that writes the issued row,
	// together with EventClaimIssued (its At is the acceptance time).
	EventClaimAccepted = "claim.accepted"
	// EventClaimIssued: a claim's issued row (and its grant) was written.
	EventClaimIssued = "claim.issued"
	// EventClaimFailed: a claim was dead-lettered (again, after a replay).
	EventClaimFailed = "claim.failed"
	// EventClaimVoided: an admin voided a dead-lettered claim; its unit
	// went back to stock.
	EventClaimVoided = "claim.voided"
	// EventPromotionOpened: the promotion's window started.
	EventPromotionOpened = "promotion.opened"
	// EventPromotionSoldOut: a first-come promotion's stock was all taken.
	EventPromotionSoldOut = "promotion.sold_out"
	// EventPromotionEnded: the promotion's window ended, or it was closed.
	EventPromotionEnded = "promotion.ended"
	// EventPromotionChanged: an admin changed the promotion (see
	// Store.UpdatePromotion); its data holds the old and new value of each
	// field that changed. Written in the transaction of the change, and
	// only if a field changed.
	EventPromotionChanged = "promotion.changed"
	// EventClaimRevoked: an admin revoked an issued claim (see
	// Store.RevokeIssued); written in the transaction of the revoke.
	EventClaimRevoked = "claim.revoked"
)

// EventTypes lists every event type.
var EventTypes = []string{
	EventClaimAccepted, EventClaimIssued, EventClaimFailed, EventClaimVoided, EventClaimRevoked,
	EventPromotionOpened, EventPromotionSoldOut, EventPromotionEnded, EventPromotionChanged,
}

// Event is one row of the outbox: a change, written in the transaction of
// the change it reports (promotion events: by the promotion manager, once
// per promotion and type).
type Event struct {
	// Seq is the event's place in the feed, assigned by the database;
	// increasing, with gaps.
	Seq int64
	// ID identifies the event for deduplication; the same change always
	// has the same id (see EventID).
	ID          string
	Type        string
	At          time.Time
	PromotionID string
	ClaimID     string // empty for promotion events
	// Data is the event's JSON object (see docs/contract.md).
	Data json.RawMessage
}

// EventID is the id of the event of type typ about subject (a claim id, a
// promotion id, or a claim id with what tells one of its failures from
// another): "evt_" and 24 hex digits of a SHA-256, the same every time, so
// a change written twice has one event.
func EventID(typ, subject string) string {
	sum := sha256.Sum256([]byte(typ + "\x00" + subject))
	return "evt_" + hex.EncodeToString(sum[:12])
}

// EventLog is the outbox side of a [Store]: the events its writes leave,
// read as a feed, and the cursors and leases of the webhook subscribers
// they are delivered to.
type EventLog interface {
	// AppendPromotionEvent writes e, a promotion event whose ID is
	// EventID(e.Type, e.PromotionID), unless it is written already; it
	// reports whether it wrote it.
	AppendPromotionEvent(ctx context.Context, e Event) (bool, error)
	// Events returns up to limit events with seq > afterSeq, in seq order,
	// of the given types (all if types is empty). Events never returns an
	// event with a seq below one it returned before unless it returned that
	// one too: a reader paging on the last seq never skips an event whose
	// transaction committed late. A limit of zero or less returns none.
	Events(ctx context.Context, afterSeq int64, types []string, limit int) ([]Event, error)
	// EventHead returns the highest seq written (0 with none), to measure
	// how far a reader lags.
	EventHead(ctx context.Context) (int64, error)
	// LeaseEvents takes or renews the lease of subscriber's delivery for
	// owner, for ttl, if no other owner holds it: ok tells, and seq is the
	// subscriber's cursor (0 for a subscriber never delivered to).
	LeaseEvents(ctx context.Context, subscriber, owner string, ttl time.Duration) (seq int64, ok bool, err error)
	// SetEventCursor moves subscriber's cursor up to seq (never back) if
	// owner holds its lease; ok is false, and nothing is written, if it
	// does not.
	SetEventCursor(ctx context.Context, subscriber, owner string, seq int64) (ok bool, err error)
	// ReleaseEvents gives up owner's lease of subscriber, so another owner
	// may take it at once.
	ReleaseEvents(ctx context.Context, subscriber, owner string) error
	// PruneEvents deletes up to limit events written before before that
	// every one of subscribers has been delivered (its cursor passed them;
	// a subscriber without a cursor has passed none), oldest first, and
	// returns how many it deleted. With no subscribers, age alone decides.
	PruneEvents(ctx context.Context, before time.Time, subscribers []string, limit int) (int64, error)
}
