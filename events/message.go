package events

import (
	"encoding/json"
	"time"

	"github.com/dibsio/dibs/store"
)

// Message is an event as a webhook body and a feed entry carry it.
type Message struct {
	ID          string          `json:"id"`
	Seq         int64           `json:"seq"`
	Type        string          `json:"type"`
	At          string          `json:"at"` // RFC 3339, UTC
	PromotionID string          `json:"promotion_id"`
	ClaimID     *string         `json:"claim_id"` // null for promotion events
	Data        json.RawMessage `json:"data"`
}

// FromStore is e as a Message.
func FromStore(e store.Event) Message {
	m := Message{ID: e.ID, Seq: e.Seq, Type: e.Type, At: e.At.UTC().Format(time.RFC3339Nano),
		PromotionID: e.PromotionID, Data: e.Data}
	if e.ClaimID != "" {
		id := e.ClaimID
		m.ClaimID = &id
	}
	if len(m.Data) == 0 {
		m.Data = json.RawMessage("{}")
	}
	return m
}

// KnownType reports whether t is an event type.
func KnownType(t string) bool {
	for _, k := range store.EventTypes {
		if t == k {
			return true
		}
	}
	return false
}
