package events

import (
	"encoding/json"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/store"
)

// Message is an event as a webhook body and a feed entry carry it: the
// API's shape of an event, its At in UTC.
type Message = api.Event

// FromStore is e as a Message.
func FromStore(e store.Event) Message {
	m := Message{ID: e.ID, Seq: e.Seq, Type: e.Type, At: e.At.UTC(),
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
