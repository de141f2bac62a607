package api

import (
	"encoding/json"
	"time"
)

// Event is one entry of the events feed (GET /v1/events), and the body of
// a webhook delivery of it.
type Event struct {
	// ID is the same every time the same change is reported: deduplicate
	// on it.
	ID string `json:"id"`
	// Seq orders the feed.
	Seq         int64     `json:"seq"`
	Type        string    `json:"type"`
	At          time.Time `json:"at"`
	PromotionID string    `json:"promotion_id"`
	// ClaimID is nil for promotion events.
	ClaimID *string `json:"claim_id"`
	// Data holds the event type's fields (docs/contract.md, "Events").
	Data json.RawMessage `json:"data"`
}

// EventPage is one page of the events feed. NextCursor is never empty: with
// no events it is the cursor given, to read from again later.
type EventPage struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"next_cursor"`
}

// AuditEntry is one admin request that changed something, or tried to.
type AuditEntry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	// PromotionID is nil when the route names none.
	PromotionID *string         `json:"promotion_id"`
	Detail      json.RawMessage `json:"detail"`
	Status      int             `json:"status"`
}

// AuditPage is one page of the audit log, newest first.
type AuditPage struct {
	Entries    []AuditEntry `json:"entries"`
	NextCursor *string      `json:"next_cursor"`
}

// AdminTokenCreate is the body of POST /v1/admin-tokens: the new token's
// name.
type AdminTokenCreate struct {
	Name string `json:"name"`
}

// AdminToken is an admin token's record. Token is set only in the answer
// to its creation.
type AdminToken struct {
	Name string `json:"name"`
	// Source is "config" or "api".
	Source string `json:"source"`
	// CreatedAt is nil for configured tokens.
	CreatedAt *time.Time `json:"created_at"`
	CreatedBy string     `json:"created_by,omitempty"`
	Token     string     `json:"token,omitempty"`
}

// AdminTokenList is the answer of GET /v1/admin-tokens: every admin token,
// configured ones first, never a value.
type AdminTokenList struct {
	AdminTokens []AdminToken `json:"admin_tokens"`
}

// Balance is a user's points over every promotion (GET
// /v1/users/{user_id}/balance).
type Balance struct {
	UserID  string `json:"user_id"`
	Balance int64  `json:"balance"`
	Entries int64  `json:"entries"`
}
