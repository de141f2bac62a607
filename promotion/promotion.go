package promotion

import (
	"context"
	"fmt"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/keyspace"
	"github.com/dibsio/dibs/store"
)

// Modes of a promotion.
const (
	// ModeFirstCome: users race for the stock; each claim takes a rank.
	ModeFirstCome = store.ModeFirstCome
	// ModeGrant: an admin uploads the users; each gets one grant.
	ModeGrant = store.ModeGrant
)

// Kinds of what a promotion hands out.
const (
	KindCoupon  = store.KindCoupon
	KindVoucher = store.KindVoucher
	KindPoint   = store.KindPoint
	// KindWebhook posts each claim to the promotion's WebhookURL (see
	// issue.Webhook).
	KindWebhook = store.KindWebhook
)

// Claim statuses, as UserClaim.Status gives them.
const (
	StatusPending = claim.StatusPending
	StatusIssued  = claim.StatusIssued
	StatusFailed  = claim.StatusFailed
	StatusVoided  = claim.StatusVoided
	// StatusRevoked is an issued claim an admin revoked (Manager.Revoke).
	StatusRevoked = claim.StatusRevoked
)

// DefaultPrefix is the Redis key prefix when Config.Prefix is empty
// (keyspace.DefaultPrefix).
const DefaultPrefix = keyspace.DefaultPrefix

// Promotion is one promotion: a limited stock of Stock units of one Kind
// (coupon codes, vouchers, points, or codes from a partner's webhook; Value
// is a code's value or the points each claim gives) that users claim
// between StartsAt and EndsAt, at most PerUserLimit each, first come first
// served (ModeFirstCome) or granted to users an admin lists (ModeGrant).
// ID names it in every key, route and claim id; Name is for people.
// [Manager.Create] fills in what is left zero (see [Normalize]); the times
// the Manager records as the promotion lives (CreatedAt, ClosedAt,
// ArchivedAt, RetiredAt) are not the caller's to set.
//
// It is the promotion as the Manager's callers see it, not the database's
// row (store.Promotion), and the two stay apart on purpose: the row also
// carries the drain's bookkeeping (Drained, DrainedAt), which the Manager
// keeps and shows only as [View]'s State, and Promotion carries what the
// Manager learns beside the row (the size of the uploaded code pool, which
// caps the stock the claim gate holds). The package converts between them
// where it reads and writes the store, field for field under the same names.
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
	// ArchivedAt is when an admin archived the ended promotion (see
	// Manager.Archive); zero if not archived.
	ArchivedAt  time.Time
	WaitingRoom WaitingRoom
	// WebhookURL is where a KindWebhook promotion's claims are posted: an
	// http or https URL of at most MaxWebhookURLLength bytes. Required for
	// that kind, empty for the others.
	WebhookURL string
	// Paused is whether an admin paused the promotion's claims (see
	// Manager.Patch): they answer ErrPaused until it is resumed.
	Paused bool
	// RevokeReturnsStock is whether a claim an admin revokes gives its
	// unit back to stock (see Manager.Revoke). Defaults to false.
	RevokeReturnsStock bool
	// ExpectedClaimsPerSecond is the claim rate the creator expects at the
	// promotion's peak, 0..MaxExpectedClaimsPerSecond, 0 for not stated:
	// each instance sizes the promotion's confirmation pool from it (see
	// PoolSize).
	ExpectedClaimsPerSecond int64
	// codes is the size of the promotion's uploaded code pool as the
	// caller read it (withCodes): 0 without a pool, codesUnknown if it
	// could not be read. It caps the stock the claim gate holds (gateStock).
	codes int64
	// RetiredAt is when the promotion was retired, its retention over
	// after it drained (see Config.Retention): its Redis state is gone and
	// the database answers for it. Zero if not retired.
	RetiredAt time.Time
	// Segments is how many parts the stock is split into, 1..MaxSegments,
	// 1 when left 0: each part lives on its own Redis hash tag (so, in a
	// Cluster, on its own master), and each user always claims from the
	// part their id hashes to (see claim.Segments). More than one only for
	// a first-come promotion without a waiting room.
	Segments int
}

// WaitingRoom is a promotion's waiting-room setting.
type WaitingRoom struct {
	Enabled         bool
	AdmitPerSecond  int
	EntryTTLSeconds int
	// AbandonAfterSeconds is how long a waiting user keeps the place
	// without checking in, 10..3,600; 120 when left 0.
	AbandonAfterSeconds int
	// PrequeueSeconds is the opening moment: for this long before StartsAt
	// joins are collected unordered and shuffled once at the start;
	// 0..86,400, 0 for none.
	PrequeueSeconds int
	// PrequeueSeed is the shuffle's random seed, 32 bytes, made by
	// Normalize when PrequeueSeconds is set; nil without a prequeue. Show
	// only its SHA-256 (PrequeueSeedSHA256) before the start; see
	// View.RevealedSeed.
	PrequeueSeed []byte
	// MaxActive caps the passes live at once (the checkout's capacity,
	// whatever the rate), 0..MaxActiveCap, 0 for no cap.
	MaxActive int
	// Message is shown to everyone in line: plain text of at most
	// MaxRoomMessageLen characters, "" for none.
	Message string
	// PowDifficulty asks each join for a proof of work of that many
	// leading zero bits of SHA-256, 0..MaxPowDifficulty, 0 for none.
	PowDifficulty int
	// Page is the setting of the room's queue page (GET /w/{id}); nil for
	// the page's defaults. Only with Enabled.
	Page *RoomPage
}

func fromStore(p store.Promotion) Promotion {
	return Promotion{
		ID: p.ID, Name: p.Name, Mode: p.Mode, Kind: p.Kind, Stock: p.Stock,
		PerUserLimit: p.PerUserLimit, Value: p.Value, StartsAt: p.StartsAt, EndsAt: p.EndsAt,
		ClosedAt: p.ClosedAt, CreatedAt: p.CreatedAt, ArchivedAt: p.ArchivedAt, WaitingRoom: WaitingRoom(p.WaitingRoom),
		WebhookURL: p.WebhookURL,
		Paused:     p.Paused, RevokeReturnsStock: p.RevokeReturnsStock,
		ExpectedClaimsPerSecond: p.ExpectedClaimsPerSecond, RetiredAt: p.RetiredAt,
		Segments: max(p.Segments, 1),
	}
}

func (p Promotion) toStore() store.Promotion {
	return store.Promotion{
		ID: p.ID, Name: p.Name, Mode: p.Mode, Kind: p.Kind, Stock: p.Stock,
		PerUserLimit: p.PerUserLimit, Value: p.Value, StartsAt: p.StartsAt, EndsAt: p.EndsAt,
		ClosedAt: p.ClosedAt, CreatedAt: p.CreatedAt, ArchivedAt: p.ArchivedAt, WaitingRoom: store.WaitingRoom(p.WaitingRoom),
		WebhookURL: p.WebhookURL,
		Paused:     p.Paused, RevokeReturnsStock: p.RevokeReturnsStock,
		ExpectedClaimsPerSecond: p.ExpectedClaimsPerSecond, RetiredAt: p.RetiredAt,
		Segments: p.Segments,
	}
}

// retired reports whether p was retired: its Redis state must never be
// made again.
func (p Promotion) retired() bool { return !p.RetiredAt.IsZero() }

// ended reports whether p's window is over at now, or it was closed.
func (p Promotion) ended(now time.Time) bool {
	return !p.ClosedAt.IsZero() || !now.Before(p.EndsAt)
}

// gate is what the claim gate needs to know of p.
func (p Promotion) gate() claim.Promotion {
	return claim.Promotion{
		ID:           p.ID,
		Grant:        p.Mode == ModeGrant,
		Stock:        p.gateStock(),
		PerUserLimit: p.PerUserLimit,
		StartsAt:     p.StartsAt,
		EndsAt:       p.EndsAt,
		Closed:       !p.ClosedAt.IsZero(),
		Paused:       p.Paused,
	}
}

// Claimed is an accepted claim, as the claim gate answered it: its id,
// rank and slot, whether it is a replay of an earlier answer, the stock
// left and when Redis accepted it (see claim.Result).
type Claimed = claim.Result

// Granted counts what Grant did.
type Granted struct {
	Enqueued   int // users granted now
	Duplicates int // users granted before, who got nothing new
}

// DeadLetter is a claim the pipeline gave up on, waiting for an admin to
// replay or void it.
type DeadLetter struct {
	ClaimID    string
	UserID     string
	Rank       int64
	Slot       int
	Reason     string
	Deliveries int64
	At         time.Time
}

func deadLetterFromStore(d store.DeadLetter) DeadLetter {
	return DeadLetter{ClaimID: d.ClaimID, UserID: d.UserID, Rank: d.Rank, Slot: d.Slot,
		Reason: d.Reason, Deliveries: d.Deliveries, At: d.At}
}

// RoomPage is the setting of a waiting room's queue page (GET /w/{id}):
// title, colours, logo, texts, return URL and mode. Every member is
// optional; the page has a default for each.
type RoomPage = store.RoomPage

// RoomPageColors are a queue page's colours, each "#rgb" or "#rrggbb".
type RoomPageColors = store.RoomPageColors

// codesUnknown is Promotion.codes when its pool's size could not be read.
const codesUnknown = -1

// gateStock is the stock the claim gate holds for p: its stock, capped by
// the codes of its pool when it has one, so no claim is accepted that has
// no code to be issued with. While the pool's size is unknown it is 0: a
// promotion never opens above its codes.
func (p Promotion) gateStock() int64 {
	switch {
	case p.codes == codesUnknown:
		return 0
	case p.codes > 0:
		return min(p.Stock, p.codes)
	}
	return p.Stock
}

// poolCodes reads the size of p's code pool into p.codes: coupon
// promotions only, codesUnknown if it cannot be read.
func poolCodes(ctx context.Context, st store.Store, p *Promotion) error {
	if p.Kind != KindCoupon || p.Mode == ModeGrant || p.segmented() {
		return nil
	}
	total, _, err := st.PoolSize(ctx, p.ID)
	if err != nil {
		p.codes = codesUnknown
		return fmt.Errorf("promotion %s: read its code pool: %w", p.ID, err)
	}
	p.codes = total
	return nil
}

// load reads promotion id's definition from the database.
func load(ctx context.Context, st store.Store, id string) (Promotion, error) {
	p, err := st.GetPromotion(ctx, id)
	return fromStore(p), domainErr(err)
}

// notRetired loads promotion id and fails with ErrEnded if it is retired:
// for the admin steps that would write its Redis state (replay, void).
func notRetired(ctx context.Context, st store.Store, id string) error {
	p, err := load(ctx, st, id)
	if err != nil {
		return err
	}
	if p.retired() {
		return errRetired
	}
	return nil
}
