// Package store keeps what dibs must never lose in a SQL database: the
// promotions, every issued claim with what it received, the dead letters and
// the outbox of events, behind the one [Store] interface. The database is the
// truth; Redis is the fast gate in front of it.
//
// Two backends implement [Store]: [github.com/dibsio/dibs/store/sqlite] (the
// embedded default, one writer) and [github.com/dibsio/dibs/store/postgres]
// (production). Both pass the same suite in store/storetest.
//
// Exactly-once issuance rests on two unique keys: UNIQUE(promotion_id, rank)
// and UNIQUE(promotion_id, user_id, slot). Issuing a claim that is already
// present with the same content is reported as [Duplicate], never as a second
// row; the same key with other content is a [Conflict]. What a claim
// receives (its [Grant]: a code, points on the user's ledger) is written in
// the same transaction as its issued row and only with a new row, so a
// redelivery never issues it twice; codes are unique across every claim.
//
// Every change that is an [Event] writes it to the outbox ([EventLog]) in
// its own transaction, under an id that is the same each time the change
// is written (see [EventID]): a claim issued again writes nothing.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/dibsio/dibs/api"
)

// Sentinel errors returned by every backend.
var (
	// ErrNotFound means the promotion (or row) does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrAlreadyExists means a promotion with that id exists.
	ErrAlreadyExists = errors.New("store: already exists")
	// ErrUnavailable wraps errors that mean the database cannot take the
	// operation right now, whatever the data: connection refused or lost,
	// timeouts, a read-only database after a failover, a full disk, a
	// deadlock or serialization failure, a lock held elsewhere. Transient:
	// retry later; never a reason to dead-letter a claim.
	ErrUnavailable = errors.New("store: database unavailable")
	// ErrClaimMismatch means a different claim is stored under this claim id:
	// RecordDeadLetter was given a claim whose claim id the database already
	// holds, as a dead letter or an issued row, for another promotion, user,
	// rank or slot (a claim id reused after Redis lost writes). Nothing was
	// written.
	ErrClaimMismatch = errors.New("store: a different claim is stored under this claim id")
	// ErrCodeTaken means a claim's code is held by another claim and no
	// free one was found (Grant.NewCode is nil, or MaxCodeAttempts codes
	// were all taken: the code space is nearly full). Nothing was written.
	ErrCodeTaken = errors.New("store: code already taken")
	// ErrPoolEmpty means a claim whose Grant asks for a pool code
	// (Grant.Pool) belongs to a promotion whose uploaded code pool has no
	// free code left. Nothing was written; the claim can never be issued
	// until more codes are uploaded, so it is a permanent failure.
	ErrPoolEmpty = errors.New("store: code pool has no free code")
	// ErrNotRetirable means RetirePromotion found the promotion not drained.
	// Nothing was written.
	ErrNotRetirable = errors.New("store: promotion is not drained")
	// ErrRetired means SetDrained was asked to mark a retired promotion
	// undrained: a retired promotion is drained for good. Nothing was
	// written.
	ErrRetired = errors.New("store: promotion is retired")
)

// Promotion modes.
const (
	ModeFirstCome = "first_come"
	ModeGrant     = "grant"
)

// Promotion kinds: what is issued.
const (
	KindCoupon  = "coupon"
	KindVoucher = "voucher"
	KindPoint   = "point"
	// KindWebhook calls the promotion's WebhookURL for each claim and
	// stores the code the partner's service answers, if any.
	KindWebhook = "webhook"
)

// Bounds of uploaded pool codes (AddPoolCodes).
const (
	// MaxPoolCodeLength is the longest pool code, in bytes.
	MaxPoolCodeLength = 64
)

// Promotion is one promotion as the database keeps it, one row per
// promotion: what is for sale (Stock units of one Kind, each worth Value),
// to whom and when (PerUserLimit claims per user between StartsAt and
// EndsAt, first come or granted by an admin: Mode), the settings an admin
// may change while it runs (Paused, RevokeReturnsStock, the waiting room)
// and the milestones of its life (CreatedAt, ClosedAt, ArchivedAt,
// DrainedAt, RetiredAt). Package promotion shows it to its callers as
// promotion.Promotion, without the drain's bookkeeping.
type Promotion struct {
	ID           string
	Name         string
	Mode         string // ModeFirstCome or ModeGrant
	Kind         string // KindCoupon, KindVoucher, KindPoint or KindWebhook
	Stock        int64  // for grants: the expected target count, 0 if unknown
	PerUserLimit int
	Value        int64
	StartsAt     time.Time
	EndsAt       time.Time
	ClosedAt     time.Time // zero while not closed
	CreatedAt    time.Time
	// ArchivedAt is when an admin archived the ended promotion; zero if
	// not archived. Archived promotions are left out of the default list.
	ArchivedAt  time.Time
	WaitingRoom WaitingRoom
	// Drained is set once the promotion has ended and every accepted claim is
	// issued or dead-lettered; the service stops watching drained promotions.
	Drained bool
	// WebhookURL is where a KindWebhook promotion's issuer posts each
	// claim; empty for the other kinds.
	WebhookURL string
	// Paused is whether an admin paused the promotion's claims (they answer
	// paused until it is resumed). Stored in the column held.
	Paused bool
	// RevokeReturnsStock is whether a revoked claim's unit goes back to
	// stock.
	RevokeReturnsStock bool
	// DrainedAt is when the promotion was last marked drained; zero while
	// not drained. Its retention counts from it.
	DrainedAt time.Time
	// RetiredAt is when the drained promotion was retired: its Redis state
	// was deleted after its retention, and the database alone answers for
	// it from then on. Zero if not retired. Never cleared.
	RetiredAt time.Time
	// ExpectedClaimsPerSecond is the claim rate the promotion's creator
	// expects at its peak, 0 if not stated; it sizes the consumer pools.
	ExpectedClaimsPerSecond int64
	// Segments is how many parts the promotion's stock is split into, each
	// on its own Redis hash tag (see claim.Segments); 1 for one part, and
	// stored as 1 when left 0.
	Segments int
}

// PromotionChange is a change of a promotion's definition (see
// Store.UpdatePromotion); nil fields are kept.
type PromotionChange struct {
	Name               *string
	Stock              *int64
	EndsAt             *time.Time
	Paused             *bool // see Promotion.Paused
	RevokeReturnsStock *bool
	// WaitingRoom changes the waiting room's levers; nil keeps them all.
	WaitingRoom *WaitingRoomChange
	// At is when the change is made: the time of its promotion.changed
	// event, and part of that event's id. Zero is now.
	At time.Time
}

// WaitingRoomChange changes the levers of a promotion's waiting room (see
// PromotionChange); nil fields are kept.
type WaitingRoomChange struct {
	AdmitPerSecond *int
	MaxActive      *int
	Message        *string
	PowDifficulty  *int
	// Page replaces the queue page's setting as a whole; nil keeps it.
	Page *RoomPageChange
}

// RoomPageChange replaces the setting of a waiting room's queue page (see
// WaitingRoomChange.Page).
type RoomPageChange struct {
	// To is the new setting, kept as the JSON of RoomPage; nil resets the
	// page to its defaults (stored as none).
	To *RoomPage
}

// WaitingRoom is a promotion's waiting-room setting.
type WaitingRoom struct {
	Enabled         bool
	AdmitPerSecond  int
	EntryTTLSeconds int
	// AbandonAfterSeconds is how long a waiting user keeps the place
	// without checking in.
	AbandonAfterSeconds int
	// PrequeueSeconds is the length of the opening moment before StartsAt,
	// during which joins are collected unordered and shuffled at the start;
	// 0 for none.
	PrequeueSeconds int
	// PrequeueSeed is the random seed of the shuffle; nil without a
	// prequeue.
	PrequeueSeed []byte
	// MaxActive caps the passes live at once; 0 for no cap.
	MaxActive int
	// Message is shown to everyone in line; "" for none.
	Message string
	// PowDifficulty is the proof of work each join needs, in leading zero
	// bits of SHA-256; 0 for none.
	PowDifficulty int
	// Page is how the room's queue page (GET /w/{id}) looks and what it
	// does once the user is admitted; nil for the page's defaults. Stored
	// as the JSON of RoomPage.
	Page *RoomPage
}

// RoomPage is the per-promotion setting of a waiting room's queue page:
// the API's shape of it, whose JSON is what the database keeps (empty
// members are left out: the page's defaults).
type RoomPage = api.QueuePage

// RoomPageColors are a queue page's colours.
type RoomPageColors = api.QueuePageColors

// Issue is one accepted claim to be written as an issued row.
type Issue struct {
	ClaimID     string
	PromotionID string
	UserID      string
	Rank        int64 // arrival order (grants: order of enqueueing)
	Slot        int   // 1..per_user_limit
	AcceptedAt  time.Time
	// Grant is what the promotion's issuer produced for the claim (see
	// package issue), written with the issued row. The zero Grant writes
	// nothing more.
	Grant Grant
}

// MaxCodeAttempts bounds how often IssueBatch asks Grant.NewCode for
// another code when the one it holds is taken by another claim.
const MaxCodeAttempts = 16

// Grant is what a claim receives beyond its issued row: a code with its
// value and expiry, and points credited to the user's balance. IssueBatch
// writes it in the same transaction as the issued row, and only when that
// row is newly inserted: a redelivered claim (Duplicate) keeps the grant
// written the first time, and nothing is written twice.
type Grant struct {
	// Code is the claim's code (coupons, vouchers), empty for none. A code
	// is unique across every claim of every promotion.
	Code string
	// Value is the code's value, stored with it (unused without a Code).
	Value int64
	// ExpiresAt is when the code stops being valid; zero for never
	// (unused without a Code).
	ExpiresAt time.Time
	// Points, if not zero, is credited to the user's balance as one ledger
	// entry keyed by the claim id.
	Points int64
	// NewCode makes another code when Code is already held by another
	// claim; IssueBatch calls it inside the transaction, up to
	// MaxCodeAttempts times, so a collision never fails the batch. Nil
	// makes a taken code an error wrapping ErrCodeTaken. Never stored.
	NewCode func() (string, error) `json:"-"`
	// Pool asks for a code from the promotion's uploaded code pool
	// (AddPoolCodes) when it has one: IssueBatch then takes a free pool
	// code for the claim inside the transaction, in place of Code, and
	// fails with an error wrapping ErrPoolEmpty if none is free. A
	// promotion without a pool gets Code as usual. The pool code is
	// written with Value, like Code; ExpiresAt does not apply.
	Pool bool
}

// PoolAdded is what AddPoolCodes did.
type PoolAdded struct {
	Added      int64 // codes new to the pool
	Duplicates int64 // codes the pool held already, or given twice
	Total      int64 // codes in the pool now, taken or free
	Free       int64 // codes in the pool not yet taken by a claim
}

// LedgerEntry is one credit of points to a user: the Points of a claim's
// Grant.
type LedgerEntry struct {
	ClaimID     string
	PromotionID string
	UserID      string
	Amount      int64
	At          time.Time // when the claim was issued
}

// Balance is a user's points: the sum of the user's ledger entries.
type Balance struct {
	UserID  string
	Points  int64 // the sum of the entries' amounts
	Entries int64 // how many ledger entries there are
}

// Outcome is what IssueBatch did with one Issue.
type Outcome int

const (
	// Inserted means a new row was written.
	Inserted Outcome = iota + 1
	// Duplicate means the same claim (same claim_id, user, rank, slot) was
	// already issued: a redelivery. Nothing was written; treat it as done.
	Duplicate
	// Conflict means a different claim already holds the rank or the
	// user's slot, or the claim was voided by an admin (its unit went back
	// to stock). Nothing was written; this is a permanent failure.
	Conflict
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Inserted:
		return "inserted"
	case Duplicate:
		return "duplicate"
	case Conflict:
		return "conflict"
	}
	return "unknown"
}

// Issued is an issued row.
type Issued struct {
	ClaimID     string
	PromotionID string
	UserID      string
	Rank        int64
	Slot        int
	AcceptedAt  time.Time
	IssuedAt    time.Time
	// Grant is what was written with the row: Code, Value and ExpiresAt if
	// the claim got a code, Points if it credited the user's balance
	// (NewCode is nil).
	Grant Grant
	// RevokedAt is when an admin revoked the claim (see
	// Store.RevokeIssued); zero while it stands. A revoked claim's code is
	// no longer valid and its points were debited.
	RevokedAt time.Time
	// RevokeReturned is whether the revoked claim's unit went back to stock.
	RevokeReturned bool
}

// Dead-letter states.
const (
	DeadFailed   = "failed"   // waiting for an admin: replay or void
	DeadReplayed = "replayed" // put back into the pipeline
	DeadVoided   = "voided"   // given up; its unit went back to stock
)

// DeadLetter is a claim that could not be issued.
type DeadLetter struct {
	ClaimID     string
	PromotionID string
	UserID      string
	Rank        int64
	Slot        int
	Reason      string
	Deliveries  int64
	State       string // DeadFailed, DeadReplayed or DeadVoided
	At          time.Time
	// Fields is the stream entry's content, kept so a replay can re-enqueue it.
	Fields map[string]string
}

// Counts are a promotion's database-side counts. Dead letters of entries
// that were no claim at all (undecodable, recorded with rank 0) are not
// counted: they hold no unit.
type Counts struct {
	Issued int64 // issued rows
	Failed int64 // dead letters in state DeadFailed whose rank no issued row holds
	Voided int64 // dead letters in state DeadVoided
	// Revoked counts the issued rows an admin revoked (included in
	// Issued), RevokedReturned those of them whose unit went back to stock.
	Revoked, RevokedReturned int64
}

// StateIssued is the State of a [KnownClaim] read from an issued row.
const StateIssued = "issued"

// KnownClaim is one claim the database knows of, as [Store.ClaimsByRank]
// reads it to rebuild Redis's counters: an issued row or, for a rank no
// issued row holds, a dead letter.
type KnownClaim struct {
	ClaimID string
	Rank    int64
	UserID  string
	Slot    int
	// State is StateIssued, or the dead letter's state (DeadFailed,
	// DeadReplayed or DeadVoided).
	State string
	// At is when the row was issued, or when the claim was dead-lettered;
	// zero if the stored time cannot be read (the claim is still returned).
	At time.Time
	// Fields is a dead letter's stream entry (nil for issued rows), so a
	// replayed claim that Redis lost can be enqueued again.
	Fields map[string]string
}

// SchemaVersioner is a Store that says which schema its database holds:
// the highest migration version applied, 0 before any. Both backends of
// dibs implement it.
type SchemaVersioner interface {
	SchemaVersion(ctx context.Context) (int, error)
}

// Store is the database behind dibs. Implementations are safe for concurrent use.
type Store interface {
	Admin
	// Reports are the reads of a promotion's report and charts.
	Reports
	// EventLog is the outbox every change below writes its events to.
	EventLog

	// Migrate applies the embedded schema migrations; it is idempotent.
	Migrate(ctx context.Context) error
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close releases the connections.
	Close() error

	// CreatePromotion inserts p; ErrAlreadyExists if the id is taken.
	CreatePromotion(ctx context.Context, p Promotion) error
	// GetPromotion returns the promotion or ErrNotFound.
	GetPromotion(ctx context.Context, id string) (Promotion, error)
	// ListPromotions returns up to limit promotions with id > after, ordered by id.
	ListPromotions(ctx context.Context, after string, limit int) ([]Promotion, error)
	// ListUndrained returns every promotion whose Drained flag is false.
	ListUndrained(ctx context.Context) ([]Promotion, error)
	// ClosePromotion sets ClosedAt (if not yet set) and returns the promotion;
	// ErrNotFound if absent. Closing twice keeps the first time.
	ClosePromotion(ctx context.Context, id string, at time.Time) (Promotion, error)
	// SetDrained marks the promotion drained (or not). Marking it drained
	// sets DrainedAt to the database's time unless it is set; marking it
	// undrained clears it, and fails with ErrRetired on a retired
	// promotion. ErrNotFound if absent.
	SetDrained(ctx context.Context, id string, drained bool) error
	// UpdatePromotion applies c to the promotion in one transaction and
	// returns it as it is now; ErrNotFound if absent. If a field changed,
	// the same transaction writes a promotion.changed event with the old
	// and new value of each field that did, under the id
	// EventID(EventPromotionChanged, "<promotion id>@<c.At>" and the
	// change), so the same change written twice is one event; a change
	// that changes nothing (the same change applied again) writes none.
	UpdatePromotion(ctx context.Context, id string, c PromotionChange) (Promotion, error)

	// RevokeIssued revokes the named issued claims of the promotion that
	// are not revoked yet, in one transaction: it sets their RevokedAt and
	// RevokeReturned (returnStock), marks their codes revoked, and debits
	// their points with one negative ledger entry each, keyed
	// "<claim_id>:revoke" (so never twice). It returns the claims it
	// revoked now, ordered by claim id; claims not issued, of another
	// promotion or revoked already are skipped, so a revoke applied twice
	// changes nothing the second time. The same transaction writes a
	// claim.revoked event of each claim it revoked, under the id
	// EventID(EventClaimRevoked, claim id). The revoked claims are recorded as
	// not applied: their steps outside the database (the status and stock
	// in Redis, an issuer's undo elsewhere) are the caller's, who then calls
	// MarkRevokesApplied; ListUnappliedRevokes finds those left undone.
	RevokeIssued(ctx context.Context, promotionID string, claimIDs []string, returnStock bool, at time.Time) ([]Issued, error)
	// MarkRevokesApplied records that the named revokes' steps outside the
	// database were done. Unknown claims are ignored.
	MarkRevokesApplied(ctx context.Context, claimIDs []string) error
	// ListUnappliedRevokes returns up to limit revoked claims, of any
	// promotion, whose steps outside the database are not recorded as done
	// and that were revoked before revokedBefore, oldest first. A limit of
	// zero or less returns none.
	ListUnappliedRevokes(ctx context.Context, revokedBefore time.Time, limit int) ([]Issued, error)
	// MarkDrained marks the promotion drained at at (kept if DrainedAt is
	// set already: the first time counts). ErrNotFound if absent.
	MarkDrained(ctx context.Context, id string, at time.Time) error
	// ListRetirable returns up to limit drained promotions whose retention
	// is over or whose retirement may be unfinished: DrainedAt at or before
	// drainedBefore and either not retired, or retired at or after
	// retiredSince (so a retirement another process recorded and did not
	// finish is found again). The unretired come first (so a page of
	// retired ones never holds up the due ones), each group by DrainedAt,
	// then id. A limit of zero or less returns none.
	ListRetirable(ctx context.Context, drainedBefore, retiredSince time.Time, limit int) ([]Promotion, error)
	// RetirePromotion marks the drained promotion retired at at and
	// returns it; a promotion retired already keeps its first time. It
	// fails with ErrNotRetirable (the promotion is not drained: a replay
	// moved claims back meanwhile) or ErrNotFound.
	RetirePromotion(ctx context.Context, id string, at time.Time) (Promotion, error)

	// IssueBatch writes the issues in one transaction (a multi-row insert
	// where the backend allows) and reports an Outcome per issue, in order.
	// Each Inserted issue's Grant is written in the same transaction; a
	// Duplicate's is not (the first one stays). So are each Inserted
	// issue's claim.accepted and claim.issued events; a Duplicate writes
	// none. An error means nothing is known to be written; the caller
	// retries.
	IssueBatch(ctx context.Context, issues []Issue) ([]Outcome, error)
	// ListIssued returns the user's issued rows in the promotion, by slot,
	// each with its Grant.
	ListIssued(ctx context.Context, promotionID, userID string) ([]Issued, error)
	// IssuedByRank returns up to limit issued rows of the promotion with
	// rank > afterRank, ordered by rank, each with its Grant: an export of
	// the codes a promotion handed out, paged on the last rank returned.
	IssuedByRank(ctx context.Context, promotionID string, afterRank int64, limit int) ([]Issued, error)
	// Balance returns the user's points: the sum of the user's ledger
	// entries over every promotion. A user without entries has a zero
	// Balance (no error).
	Balance(ctx context.Context, userID string) (Balance, error)
	// Counts returns the promotion's database-side counts.
	Counts(ctx context.Context, promotionID string) (Counts, error)

	// AddPoolCodes adds codes to the promotion's code pool in one
	// transaction: each code new to the pool is added free, a code the
	// pool holds already (or that codes holds twice) is counted as a
	// duplicate and changes nothing. The caller validates the codes (1 to
	// MaxPoolCodeLength printable characters). A code is unique within its
	// promotion's pool; pools of different promotions may share codes.
	AddPoolCodes(ctx context.Context, promotionID string, codes []string) (PoolAdded, error)
	// PoolSize returns how many codes the promotion's pool holds, and how
	// many of them no claim has taken; zero for a promotion without a pool.
	PoolSize(ctx context.Context, promotionID string) (total, free int64, err error)

	// MaxRanks returns, for each of the promotions, the highest rank the
	// database holds, issued or dead-lettered; a promotion with neither (or
	// unknown) maps to 0. Redis's rank counter must never be below it: if it
	// is, Redis lost writes. One indexed lookup per promotion, in one query.
	MaxRanks(ctx context.Context, promotionIDs []string) (map[string]int64, error)
	// ClaimsByRank returns up to limit claims of the promotion with rank >
	// afterRank, ordered by rank, one per rank: the issued row where there is
	// one, else the dead letter. Claims without a rank (undecodable entries)
	// are left out. Paging on the last rank returned walks every claim the
	// database knows with memory bounded by limit. A stored time in any form
	// the database can hold is read; one that still cannot be read comes
	// back as a zero At, never as an error.
	ClaimsByRank(ctx context.Context, promotionID string, afterRank int64, limit int) ([]KnownClaim, error)

	// RecordDeadLetter inserts the dead letter in state DeadFailed, or, if the
	// claim is already recorded, updates reason, deliveries and time and sets
	// the state back to DeadFailed (a replayed claim that failed again). A
	// failed dead letter has no side effect pending, so it is recorded as
	// applied. A claim already voided stays voided, and its side effect
	// stays as recorded.
	//
	// The claim is the same one only if the dead letter or issued row stored
	// under its claim id has the same promotion, user, rank and slot. If one
	// holds another claim, RecordDeadLetter writes nothing and returns an
	// error wrapping ErrClaimMismatch: a dead letter never overwrites a
	// different claim. An issued row of the same claim does not stop the
	// dead letter from being recorded. A new dead letter, or a replayed
	// claim failing again, writes a claim.failed event in the same
	// transaction; a failure recorded again writes none.
	RecordDeadLetter(ctx context.Context, d DeadLetter) error
	// ListDeadLetters returns up to limit dead letters of the promotion in
	// state DeadFailed with claim_id > after, ordered by claim_id.
	ListDeadLetters(ctx context.Context, promotionID, after string, limit int) ([]DeadLetter, error)
	// TransitionDeadLetters moves the named claims (all failed ones if
	// claimIDs is nil) from state DeadFailed to state to (DeadReplayed or
	// DeadVoided), atomically, and returns the dead letters it moved. Claims
	// not in state DeadFailed are skipped, so two concurrent calls never
	// move the same claim twice. When to is DeadVoided, claims that have an
	// issued row are skipped too: such a claim was issued (its
	// acknowledgement lost), and voiding it would return to stock a unit the
	// issued row still holds, an oversell. It may still be replayed, which
	// finds it issued. A void and an IssueBatch of the same claim are
	// serialised, whether or not the dead letter existed when the issue
	// began: the void either sees the issued row and skips the claim, or
	// commits first and the issue finds the claim voided (a Conflict).
	// Each claim voided gets a claim.voided event in the same transaction.
	//
	// The moved claims are recorded as moved now with their side effect (the
	// claim enqueued again, or its unit returned to stock) not yet applied:
	// the caller does it, then calls MarkDeadLettersApplied. If the caller
	// stops in between, ListUnappliedDeadLetters finds them.
	TransitionDeadLetters(ctx context.Context, promotionID string, claimIDs []string, to string) ([]DeadLetter, error)
	// MarkDeadLettersApplied records that the Redis side effect of the named
	// claims' transition to state was done. Unknown claims, and claims whose
	// state is now another (a late mark of an earlier transition), are
	// ignored.
	MarkDeadLettersApplied(ctx context.Context, state string, claimIDs []string) error
	// ListUnappliedDeadLetters returns up to limit dead letters, of any
	// promotion, in state DeadReplayed or DeadVoided whose side effect is not
	// recorded as done and that moved before movedBefore, oldest move first
	// (ties by claim_id). A limit of zero or less returns none.
	ListUnappliedDeadLetters(ctx context.Context, movedBefore time.Time, limit int) ([]DeadLetter, error)
	// UnhandledDeadLetters returns, for each promotion that has any, how
	// many of its dead letters are in state DeadFailed — those
	// ListDeadLetters lists, waiting for an admin to replay or void them —
	// leaving out retired promotions, whose dead letters can no longer be
	// handled. One query over every promotion.
	UnhandledDeadLetters(ctx context.Context) (map[string]int64, error)
}
