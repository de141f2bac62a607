package api

import (
	"encoding/json"
	"time"
)

// Promotion is a promotion as the server shows it (GET, POST and PATCH
// /v1/promotions…).
type Promotion struct {
	ID           string     `json:"id"`
	Name         string     `json:"name"`
	Mode         string     `json:"mode"`
	Kind         string     `json:"kind"`
	Stock        int64      `json:"stock"`
	PerUserLimit int        `json:"per_user_limit"`
	Value        int64      `json:"value"`
	State        string     `json:"state"`
	StartsAt     time.Time  `json:"starts_at"`
	EndsAt       time.Time  `json:"ends_at"`
	ClosedAt     *time.Time `json:"closed_at"`
	CreatedAt    time.Time  `json:"created_at"`
	ArchivedAt   *time.Time `json:"archived_at"`
	// Paused: an admin paused the promotion's claims (PATCH).
	Paused             bool     `json:"paused"`
	RevokeReturnsStock bool     `json:"revoke_returns_stock"`
	Counts             Counts   `json:"counts"`
	WaitingRoom        RoomView `json:"waiting_room"`
	// WebhookURL is where a webhook promotion posts each claim; shown to
	// admin callers only.
	WebhookURL string `json:"webhook_url,omitempty"`
	// RetiredAt is set once the promotion is retired (its Redis state
	// deleted after its retention; the database answers for it).
	RetiredAt               *time.Time `json:"retired_at"`
	ExpectedClaimsPerSecond int64      `json:"expected_claims_per_second"`
	// Segments is how many hash slots the stock is split over (1: one).
	Segments int `json:"segments"`
}

// Counts are a promotion's claim counts. Remaining is nil for grant
// promotions.
type Counts struct {
	Accepted  int64  `json:"accepted"`
	Pending   int64  `json:"pending"`
	Issued    int64  `json:"issued"`
	Revoked   int64  `json:"revoked"`
	Failed    int64  `json:"failed"`
	Remaining *int64 `json:"remaining"`
}

// RoomView is a promotion's waiting room: its settings (when enabled) and
// counts.
type RoomView struct {
	Enabled             bool   `json:"enabled"`
	AdmitPerSecond      int    `json:"admit_per_second,omitempty"`
	EntryTTLSeconds     int    `json:"entry_ttl_seconds,omitempty"`
	AbandonAfterSeconds int    `json:"abandon_after_seconds,omitempty"`
	PrequeueSeconds     int    `json:"prequeue_seconds,omitempty"`
	PrequeueSeedSHA256  string `json:"prequeue_seed_sha256,omitempty"`
	// PrequeueSeed is shown from starts_at on only.
	PrequeueSeed  string `json:"prequeue_seed,omitempty"`
	MaxActive     int    `json:"max_active,omitempty"`
	Message       string `json:"message,omitempty"`
	PowDifficulty int    `json:"pow_difficulty,omitempty"`
	// Page is the queue page's setting, nil when none was given.
	Page        *QueuePage `json:"page,omitempty"`
	Waiting     int64      `json:"waiting"`
	Admitted    int64      `json:"admitted"`
	PassesSpent int64      `json:"passes_spent"`
	Abandoned   int64      `json:"abandoned"`
}

// QueuePage is the setting of a waiting room's queue page (GET /w/{id}):
// every member is optional, the page has a default for each (see
// docs/contract.md, "The queue page"). Its JSON is also what the database
// keeps of it.
type QueuePage struct {
	// Title is the page's title and heading (default: the promotion's
	// name).
	Title string `json:"title,omitempty"`
	// Colors are the page's colours, each "#rgb" or "#rrggbb".
	Colors QueuePageColors `json:"colors,omitzero"`
	// LogoURL is an https URL of an image shown above the title.
	LogoURL string `json:"logo_url,omitempty"`
	// Texts replace the page's default texts, by name ("heading",
	// "waiting", "sold_out", …).
	Texts map[string]string `json:"texts,omitempty"`
	// ReturnURL is the shop's page: in mode "return" the page hands the
	// entry token to it in the URL fragment; in mode "claim" it is the
	// link back to the shop.
	ReturnURL string `json:"return_url,omitempty"`
	// Mode is what the page does once its user is admitted: "claim" (the
	// default: claim at once and show the result) or "return" (go to
	// ReturnURL with the entry token in the fragment).
	Mode string `json:"mode,omitempty"`
}

// QueuePageColors are a queue page's colours.
type QueuePageColors struct {
	Background string `json:"background,omitempty"`
	Text       string `json:"text,omitempty"`
	Accent     string `json:"accent,omitempty"`
}

// PromotionPage is one page of GET /v1/promotions.
type PromotionPage struct {
	Promotions []Promotion `json:"promotions"`
	// NextCursor is nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// Rebuild is the answer of POST /v1/promotions/{id}/rebuild: what the
// rebuild did.
type Rebuild struct {
	PromotionID     string `json:"promotion_id"`
	Claims          int64  `json:"claims"`
	DatabaseMaxRank int64  `json:"database_max_rank"`
	Seq             int64  `json:"seq"`
	Requeued        int64  `json:"requeued"`
	TookMS          int64  `json:"took_ms"`
}

// PrequeuePage is one page of the opening moment's audit record (GET
// /v1/promotions/{id}/prequeue): the revealed seed, its hash, and the
// users in the order the shuffle gave them places.
type PrequeuePage struct {
	PromotionID string   `json:"promotion_id"`
	Seed        string   `json:"seed"`
	SeedSHA256  string   `json:"seed_sha256"`
	Total       int64    `json:"total"`
	Users       []string `json:"users"`
	NextCursor  *string  `json:"next_cursor"`
}

// NewPromotion is the body of POST /v1/promotions as a client writes it.
// Zero members are left out and take the server's defaults.
type NewPromotion struct {
	// ID is the promotion's id; generated by the server if empty.
	ID string `json:"id,omitempty"`
	// Name is shown to operators.
	Name string `json:"name,omitempty"`
	// Mode is "first_come" (the default) or "grant".
	Mode string `json:"mode,omitempty"`
	// Kind is what a claim receives: "coupon" (the default), "voucher",
	// "point" or "webhook".
	Kind string `json:"kind,omitempty"`
	// Stock is 1..1,000,000,000 (for grant: the expected target count, may
	// be 0).
	Stock int64 `json:"stock,omitempty"`
	// PerUserLimit is 1..1,000; 0 leaves the default of 1.
	PerUserLimit int `json:"per_user_limit,omitempty"`
	// StartsAt defaults to now.
	StartsAt *time.Time `json:"starts_at,omitempty"`
	// EndsAt defaults to StartsAt + 24 h.
	EndsAt *time.Time `json:"ends_at,omitempty"`
	// Value is the amount a claim receives.
	Value int64 `json:"value,omitempty"`
	// WaitingRoom turns the waiting room on; nil leaves it off.
	WaitingRoom *WaitingRoomSettings `json:"waiting_room,omitempty"`
	// RevokeReturnsStock gives a revoked claim's unit back to stock.
	RevokeReturnsStock bool `json:"revoke_returns_stock,omitempty"`
	// ExpectedClaimsPerSecond is the claim rate expected at the peak; it
	// sizes the confirmation pools.
	ExpectedClaimsPerSecond int64 `json:"expected_claims_per_second,omitempty"`
	// Segments splits the stock over that many Redis hash tags (1..64; 0
	// leaves the default of 1). First come only, without a waiting room.
	Segments int `json:"segments,omitempty"`
	// AllowPastEndsAt lets a promotion whose end has passed be created
	// (ended).
	AllowPastEndsAt bool `json:"allow_past_ends_at,omitempty"`
	// WebhookURL is where a webhook promotion posts each claim.
	WebhookURL string `json:"webhook_url,omitempty"`
}

// WaitingRoomSettings configure a promotion's waiting room at creation;
// zero members take the server's defaults.
type WaitingRoomSettings struct {
	Enabled             bool `json:"enabled"`
	AdmitPerSecond      int  `json:"admit_per_second,omitempty"`
	EntryTTLSeconds     int  `json:"entry_ttl_seconds,omitempty"`
	AbandonAfterSeconds int  `json:"abandon_after_seconds,omitempty"`
	PrequeueSeconds     int  `json:"prequeue_seconds,omitempty"`
	// MaxActive caps the passes live at once (0: no cap).
	MaxActive int `json:"max_active,omitempty"`
	// Message is shown to everyone in line (at most 280 characters of
	// plain text).
	Message string `json:"message,omitempty"`
	// PowDifficulty asks each join for a proof of work of that many
	// leading zero bits of SHA-256 (0: none).
	PowDifficulty int `json:"pow_difficulty,omitempty"`
	// Page is the setting of the room's queue page (GET /w/{id}); nil
	// for the page's defaults.
	Page *QueuePage `json:"page,omitempty"`
}

// PromotionPatch is the body of PATCH /v1/promotions/{id} as a client
// writes it: nil members are left out, and the server keeps them.
type PromotionPatch struct {
	Name               *string    `json:"name,omitempty"`
	Stock              *int64     `json:"stock,omitempty"`
	EndsAt             *time.Time `json:"ends_at,omitempty"`
	Paused             *bool      `json:"paused,omitempty"`
	RevokeReturnsStock *bool      `json:"revoke_returns_stock,omitempty"`
	// WaitingRoom changes the levers of the promotion's waiting room.
	WaitingRoom *WaitingRoomPatch `json:"waiting_room,omitempty"`
}

// WaitingRoomPatch changes the levers of a running waiting room and its
// queue page's setting: nil members are kept.
type WaitingRoomPatch struct {
	// AdmitPerSecond is the new admission rate (1..1,000,000); what the
	// old rate allowed until the change is kept.
	AdmitPerSecond *int `json:"admit_per_second,omitempty"`
	// MaxActive is the new cap on live passes; 0 lifts it.
	MaxActive *int `json:"max_active,omitempty"`
	// Message is the new message to the line; "" clears it.
	Message *string `json:"message,omitempty"`
	// PowDifficulty is the new proof-of-work difficulty (0..24); 0 turns
	// it off.
	PowDifficulty *int `json:"pow_difficulty,omitempty"`
	// Page replaces the queue page's setting as a whole (PageChange.To
	// nil: back to the defaults).
	Page *PageChange `json:"page,omitempty"`
}

// PageChange replaces the setting of a waiting room's queue page (see
// WaitingRoomPatch.Page): To is the new setting, nil to go back to the
// page's defaults (sent as null).
type PageChange struct {
	To *QueuePage
}

// MarshalJSON sends the new setting, or null for the defaults.
func (c PageChange) MarshalJSON() ([]byte, error) { return json.Marshal(c.To) }
