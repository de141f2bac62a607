package store

import (
	"context"
	"time"
)

// Admin is what the database keeps for operators apart from promotions and
// claims: the audit log of admin actions, the admin tokens issued through
// the API, the promotion list filtered and sorted, the winners of a
// promotion in rank order, and the erasure of a user. Every [Store]
// implements it.
type Admin interface {
	// ListPromotionsBy returns up to q.Limit promotions matching q, in q's
	// order, after q's cursor. A limit of zero or less returns none.
	ListPromotionsBy(ctx context.Context, q PromotionQuery) ([]Promotion, error)
	// ArchivePromotion sets ArchivedAt (if not yet set) and returns the
	// promotion; ErrNotFound if absent. Archiving twice keeps the first
	// time. Whether the promotion may be archived is the caller's decision.
	ArchivePromotion(ctx context.Context, id string, at time.Time) (Promotion, error)

	// AppendAudit records one admin action; the stored entry's ID and, when
	// zero, At are set by the database.
	AppendAudit(ctx context.Context, e AuditEntry) error
	// ListAudit returns up to limit entries with ID < beforeID (every entry
	// when beforeID is 0 or less), newest first.
	ListAudit(ctx context.Context, beforeID int64, limit int) ([]AuditEntry, error)

	// CreateAdminToken stores a token by name and SHA-256; ErrAlreadyExists
	// if the name is taken. The token itself is never stored.
	CreateAdminToken(ctx context.Context, t AdminToken) error
	// ListAdminTokens returns every stored token, by name.
	ListAdminTokens(ctx context.Context) ([]AdminToken, error)
	// AdminTokenByHash returns the token whose SHA-256 (hex) is sha256Hex,
	// or ErrNotFound.
	AdminTokenByHash(ctx context.Context, sha256Hex string) (AdminToken, error)
	// DeleteAdminToken removes the named token; ErrNotFound if absent.
	DeleteAdminToken(ctx context.Context, name string) error

	// EraseUser replaces every stored id of userID by erasedID, in one
	// transaction: in issued rows and dead letters the user_id, the claim
	// ids that carry the user id (a grant's <promotion>@<user>, a
	// dead letter's <claim_id>~<user>) and the user in a dead letter's
	// stream fields; the claim ids of codes and ledger entries follow
	// their claims, and the user's ledger entries move to erasedID whole,
	// so the balance stays, under the token; in the user's claim events
	// the claim id (column and data), the user_id in the data and the
	// event id (which is made from the claim id). Counts stay as they were. Erasing an erased user (or
	// one the database does not know) changes nothing. Every table added
	// later that holds user ids must be added here.
	EraseUser(ctx context.Context, userID, erasedID string) (Erased, error)
}

// Orders of [PromotionQuery].Sort.
const (
	SortID            = ""            // by id (the default)
	SortCreatedAt     = "created_at"  // oldest first, ties by id
	SortCreatedAtDesc = "-created_at" // newest first, ties by id descending
)

// Phases of [PromotionQuery].Phase, judged by the database at Now.
const (
	PhaseAny       = ""          // every phase
	PhaseScheduled = "scheduled" // not closed, before starts_at
	PhaseLive      = "live"      // not closed, started, before ends_at
	PhaseEnded     = "ended"     // closed, or past ends_at
	PhaseClosed    = "closed"    // closed by an admin
)

// Values of [PromotionQuery].Archived.
const (
	ArchivedExclude = 0 // archived promotions left out (the default)
	ArchivedOnly    = 1 // only archived promotions
	ArchivedAny     = 2 // archived or not
)

// PromotionQuery selects promotions for [Admin.ListPromotionsBy].
type PromotionQuery struct {
	// Sort is SortID, SortCreatedAt or SortCreatedAtDesc.
	Sort string
	// AfterID and AfterCreatedAt are the cursor: the last promotion of the
	// previous page (AfterCreatedAt only for the created_at orders). An
	// empty AfterID starts at the beginning.
	AfterID        string
	AfterCreatedAt time.Time
	// Phase keeps the promotions in one phase at Now: PhaseAny,
	// PhaseScheduled, PhaseLive, PhaseEnded or PhaseClosed.
	Phase string
	// Now is the time the phase is judged at.
	Now time.Time
	// Archived is ArchivedExclude, ArchivedOnly or ArchivedAny.
	Archived int
	// Limit bounds the promotions returned.
	Limit int
}

// AuditEntry is one admin action.
type AuditEntry struct {
	ID          int64
	At          time.Time
	Actor       string // the admin token's name
	Action      string // e.g. promotion.create
	PromotionID string // "" when the action names none
	// Detail is a JSON object with what else identifies the action (the
	// path, the Idempotency-Key's presence, a token's name); never a
	// secret. Empty is stored as {}.
	Detail string
	Status int // the HTTP status answered
}

// AdminToken is an admin token issued through the API, known by its name
// and the SHA-256 of its value.
type AdminToken struct {
	Name      string
	SHA256    string // hex
	CreatedAt time.Time
	CreatedBy string // the name of the token that created it
}

// Erased counts the rows [Admin.EraseUser] rewrote.
type Erased struct {
	Issued      int64
	DeadLetters int64
	Events      int64
}
