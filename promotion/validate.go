package promotion

import (
	"crypto/rand"
	"net/url"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/ident"
	"github.com/dibsio/dibs/waitroom"
)

// Limits of a promotion's definition.
const (
	MaxStock            = 1_000_000_000
	MaxPerUserLimit     = 1_000
	DefaultDuration     = 24 * time.Hour
	MaxEntryTTLSeconds  = 86_400
	MaxAdmitPerSecond   = 1_000_000
	DefaultAdmitPerSec  = 100
	DefaultEntryTTLSecs = 300
	// DefaultAbandonAfterSecs, MinAbandonAfterSeconds and
	// MaxAbandonAfterSeconds bound WaitingRoom.AbandonAfterSeconds.
	DefaultAbandonAfterSecs = 120
	MinAbandonAfterSeconds  = 10
	MaxAbandonAfterSeconds  = 3_600
	// MaxPrequeueSeconds is the longest opening moment.
	MaxPrequeueSeconds = 86_400
	// PrequeueSeedLen is the length of a prequeue's seed in bytes.
	PrequeueSeedLen = 32
	// MaxWebhookURLLength bounds Promotion.WebhookURL, in bytes.
	MaxWebhookURLLength = 2048
	// MaxSegments bounds Promotion.Segments.
	MaxSegments = claim.MaxSegments
	// MaxActivePasses bounds WaitingRoom.MaxActive.
	MaxActivePasses = waitroom.MaxActiveCap
	// MaxRoomMessageLen bounds WaitingRoom.Message, in characters.
	MaxRoomMessageLen = waitroom.MaxMessageLen
	// MaxPowDifficulty bounds WaitingRoom.PowDifficulty.
	MaxPowDifficulty = waitroom.MaxPowDifficulty
)

// ValidID reports whether s is a valid promotion or user id. It is
// [ident.Valid], the rule every identifier in dibs follows: 1–64
// characters from A-Z a-z 0-9 _ - . : @, the first a letter or digit.
func ValidID(s string) bool { return ident.Valid(s) }

// Normalize fills defaults into p (mode, kind, limit, window, waiting room)
// relative to now, and validates it. Times are converted to UTC. A waiting
// room with a prequeue and no seed gets a new random seed of PrequeueSeedLen
// bytes; one without a prequeue has its seed cleared.
func Normalize(p *Promotion, now time.Time) error {
	for _, step := range []func(*Promotion) error{
		normalizeIdentity,
		normalizeStock,
		func(p *Promotion) error { return normalizeWindow(p, now) },
		normalizeRoom,
		func(p *Promotion) error { return normalizePage(&p.WaitingRoom) },
		normalizeSegments,
	} {
		if err := step(p); err != nil {
			return err
		}
	}
	return nil
}

// normalizeIdentity checks p's id and name, and fills in and checks its
// mode, its kind and the webhook URL its kind needs.
func normalizeIdentity(p *Promotion) error {
	if p.ID != "" && !ValidID(p.ID) {
		return invalid("id", "must be 1-64 characters from A-Z a-z 0-9 _ - . : @, starting with a letter or digit")
	}
	if len(p.Name) > 200 {
		return invalid("name", "must be at most 200 characters")
	}
	switch p.Mode {
	case "":
		p.Mode = ModeFirstCome
	case ModeFirstCome, ModeGrant:
	default:
		return invalid("mode", "must be first_come or grant")
	}
	switch p.Kind {
	case "":
		p.Kind = KindCoupon
	case KindCoupon, KindVoucher, KindPoint, KindWebhook:
	default:
		return invalid("kind", "must be coupon, voucher, point or webhook")
	}
	return validWebhookURL(p.Kind, p.WebhookURL)
}

// normalizeStock fills in and checks what p hands out: its stock, the
// per-user limit (one for a grant), its value and the claim rate it
// expects.
func normalizeStock(p *Promotion) error {
	switch {
	case p.Mode == ModeGrant && p.Stock == 0:
	case p.Stock < 1 || p.Stock > MaxStock:
		return invalid("stock", "must be between 1 and %d", MaxStock)
	}
	if p.PerUserLimit == 0 {
		p.PerUserLimit = 1
	}
	if p.PerUserLimit < 1 || p.PerUserLimit > MaxPerUserLimit {
		return invalid("per_user_limit", "must be between 1 and %d", MaxPerUserLimit)
	}
	if p.Mode == ModeGrant {
		p.PerUserLimit = 1
		if p.RevokeReturnsStock {
			return invalid("revoke_returns_stock", "a grant promotion has no stock to return a unit to")
		}
	}
	if p.Value < 0 {
		return invalid("value", "must not be negative")
	}
	if p.ExpectedClaimsPerSecond < 0 || p.ExpectedClaimsPerSecond > MaxExpectedClaimsPerSecond {
		return invalid("expected_claims_per_second", "must be between 0 and %d", MaxExpectedClaimsPerSecond)
	}
	return nil
}

// normalizeWindow fills in p's window (from now, for DefaultDuration),
// in UTC to the millisecond, and checks that it ends after it starts.
func normalizeWindow(p *Promotion, now time.Time) error {
	if p.StartsAt.IsZero() {
		p.StartsAt = now
	}
	p.StartsAt = p.StartsAt.UTC().Truncate(time.Millisecond)
	if p.EndsAt.IsZero() {
		p.EndsAt = p.StartsAt.Add(DefaultDuration)
	}
	p.EndsAt = p.EndsAt.UTC().Truncate(time.Millisecond)
	if !p.EndsAt.After(p.StartsAt) {
		return invalid("ends_at", "must be after starts_at")
	}
	return nil
}

// normalizeRoom fills in and checks p's waiting room, if any of its
// settings is set: the rate, the entry and abandon times, the prequeue
// and the levers. A grant promotion has none.
func normalizeRoom(p *Promotion) error {
	w := &p.WaitingRoom
	if !w.Enabled && w.AdmitPerSecond == 0 && w.EntryTTLSeconds == 0 &&
		w.AbandonAfterSeconds == 0 && w.PrequeueSeconds == 0 && w.MaxActive == 0 && w.Message == "" && w.PowDifficulty == 0 {
		return nil
	}
	if w.AdmitPerSecond == 0 {
		w.AdmitPerSecond = DefaultAdmitPerSec
	}
	if w.EntryTTLSeconds == 0 {
		w.EntryTTLSeconds = DefaultEntryTTLSecs
	}
	if w.AbandonAfterSeconds == 0 {
		w.AbandonAfterSeconds = DefaultAbandonAfterSecs
	}
	if w.AdmitPerSecond < 1 || w.AdmitPerSecond > MaxAdmitPerSecond {
		return invalid("waiting_room.admit_per_second", "must be between 1 and %d", MaxAdmitPerSecond)
	}
	if w.EntryTTLSeconds < 1 || w.EntryTTLSeconds > MaxEntryTTLSeconds {
		return invalid("waiting_room.entry_ttl_seconds", "must be between 1 and %d", MaxEntryTTLSeconds)
	}
	if w.AbandonAfterSeconds < MinAbandonAfterSeconds || w.AbandonAfterSeconds > MaxAbandonAfterSeconds {
		return invalid("waiting_room.abandon_after_seconds", "must be between %d and %d", MinAbandonAfterSeconds, MaxAbandonAfterSeconds)
	}
	if w.Enabled && p.Mode == ModeGrant {
		return invalid("waiting_room.enabled", "a grant promotion has no waiting room: its targets are uploaded, not raced for")
	}
	if err := normalizePrequeue(w); err != nil {
		return err
	}
	return checkLevers(*w)
}

// checkLevers checks the levers of w an operator may change later
// (max_active, message, pow_difficulty): each in bounds, and only with the
// room enabled.
func checkLevers(w WaitingRoom) error {
	switch {
	case w.MaxActive < 0 || w.MaxActive > MaxActivePasses:
		return invalid("waiting_room.max_active", "must be between 0 and %d", MaxActivePasses)
	case w.PowDifficulty < 0 || w.PowDifficulty > MaxPowDifficulty:
		return invalid("waiting_room.pow_difficulty", "must be between 0 and %d", MaxPowDifficulty)
	case waitroom.CheckMessage(w.Message) != nil:
		return invalid("waiting_room.message", "must be one line of plain text of at most %d characters (no control characters)", MaxRoomMessageLen)
	case w.Enabled:
	case w.MaxActive != 0:
		return invalid("waiting_room.max_active", "needs the waiting room enabled")
	case w.Message != "":
		return invalid("waiting_room.message", "needs the waiting room enabled")
	case w.PowDifficulty != 0:
		return invalid("waiting_room.pow_difficulty", "needs the waiting room enabled")
	}
	return nil
}

// normalizeSegments fills in and checks p's segments: 1..MaxSegments, 1
// when left 0; more than one only for a first-come promotion without a
// waiting room (admission reads one segment's stock).
func normalizeSegments(p *Promotion) error {
	if p.Segments == 0 {
		p.Segments = 1
	}
	switch {
	case p.Segments < 1 || p.Segments > MaxSegments:
		return invalid("segments", "must be between 1 and %d", MaxSegments)
	case p.Segments == 1:
	case p.Mode == ModeGrant:
		return invalid("segments", "a grant promotion has one segment: its targets are uploaded, not raced for")
	case p.WaitingRoom.Enabled:
		return invalid("segments", "a promotion with a waiting room has one segment: admission reads the stock of one segment only")
	}
	return nil
}

// normalizePrequeue checks the opening moment of w and gives it a seed.
func normalizePrequeue(w *WaitingRoom) error {
	switch {
	case w.PrequeueSeconds < 0 || w.PrequeueSeconds > MaxPrequeueSeconds:
		return invalid("waiting_room.prequeue_seconds", "must be between 0 and %d", MaxPrequeueSeconds)
	case w.PrequeueSeconds == 0:
		w.PrequeueSeed = nil
		return nil
	case !w.Enabled:
		return invalid("waiting_room.prequeue_seconds", "needs the waiting room enabled")
	case w.PrequeueSeed == nil:
		w.PrequeueSeed = make([]byte, PrequeueSeedLen)
		_, _ = rand.Read(w.PrequeueSeed) // never fails (crypto/rand)
	case len(w.PrequeueSeed) != PrequeueSeedLen:
		return invalid("waiting_room.prequeue_seed", "must be %d bytes", PrequeueSeedLen)
	}
	return nil
}

// validWebhookURL checks a promotion's webhook_url against its kind: an
// absolute http or https URL with a host, without user info or fragment,
// for KindWebhook; empty for the other kinds.
func validWebhookURL(kind, raw string) error {
	if kind != KindWebhook {
		if raw != "" {
			return invalid("webhook_url", "is only for kind webhook")
		}
		return nil
	}
	if raw == "" {
		return invalid("webhook_url", "is required for kind webhook")
	}
	if len(raw) > MaxWebhookURLLength {
		return invalid("webhook_url", "must be at most %d bytes", MaxWebhookURLLength)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return invalid("webhook_url", "is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return invalid("webhook_url", "must be an http or https URL")
	case u.Host == "" || u.Hostname() == "":
		return invalid("webhook_url", "must name a host")
	case u.User != nil:
		return invalid("webhook_url", "must not carry user info (the body is signed instead)")
	case u.Fragment != "" || u.RawFragment != "":
		return invalid("webhook_url", "must not have a fragment")
	}
	return nil
}
