package waitroom

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"runtime"
	"time"
)

// Defaults of [Config] and [Settings].
const (
	// DefaultAdmitPerSecond is how many users a room lets in per second.
	DefaultAdmitPerSecond = 100
	// DefaultEntryTTL is how long a pass lets its user claim.
	DefaultEntryTTL = 300 * time.Second
	// DefaultAbandonAfter is how long a waiting user keeps the place without
	// checking in.
	DefaultAbandonAfter = 120 * time.Second
	// DefaultTickInterval is how often the scheduler advances admission.
	DefaultTickInterval = time.Second
	// DefaultTickBatch is the most places one tick examines in one room, and
	// the most expired passes it reclaims.
	DefaultTickBatch = 10000
)

// DefaultWorkers returns the default size of the scheduler's worker pool:
// twice GOMAXPROCS, as room ticks wait on Redis more than they compute.
func DefaultWorkers() int { return 2 * runtime.GOMAXPROCS(0) }

// Limits of [Settings], those of the promotion API.
const (
	// MaxAdmitPerSecond is the highest admission rate of a room.
	MaxAdmitPerSecond = 1_000_000
	// MaxEntryTTL is the longest a pass may live.
	MaxEntryTTL = 24 * time.Hour
	// MaxActiveCap is the highest cap on live passes (Settings.MaxActive).
	MaxActiveCap = 1_000_000_000
	// MaxMessageLen is the longest message to the line, in characters.
	MaxMessageLen = 280
	// MaxPowDifficulty is the highest proof-of-work difficulty, in leading
	// zero bits: 2^24 hashes, about 10 s of a phone's Web Crypto (see
	// docs/waitroom.md), well inside ChallengeTTL.
	MaxPowDifficulty = 24
)

// Admission is a user let in by a tick, with the entry token to hand over.
type Admission struct {
	// Pass is the user's pass.
	Pass Pass
	// Token is the signed entry token of Pass.
	Token string
}

// Config configures Rooms and their Scheduler.
type Config struct {
	// Prefix is prepended to every key, before the {promotion} hash tag. It
	// must be the claim gate's prefix, so rooms read their promotion's stock.
	// Defaults to DefaultPrefix.
	Prefix string
	// Keys sign and verify entry tokens: one, or two during a rotation, the
	// first signing (see ParseKeys). Every instance must hold the same keys.
	// Required.
	Keys []Key
	// Instance names this process as a holder of room leases. Defaults to a
	// random id.
	Instance string
	// TickInterval is how often the scheduler advances admission in every
	// active room. Defaults to DefaultTickInterval (1s).
	TickInterval time.Duration
	// Workers is the size of the scheduler's worker pool; a room's tick finds
	// an idle worker or runs in the scheduler's own round (caller-runs), so
	// a full pool slows the rounds down instead of queueing work. Defaults to
	// DefaultWorkers() (2 × GOMAXPROCS).
	Workers int
	// LeaseTTL is how long a room's tick lease lives without renewal; when
	// its holder dies, another instance takes the room over at its first tick
	// after the lease lapsed. It must be at least TickInterval. Defaults to
	// 1.5 × TickInterval.
	LeaseTTL time.Duration
	// TickBatch is the most places one tick examines, and the most expired
	// passes it reclaims, in one room; a tick that stops at it leaves the
	// rest to the next. Defaults to DefaultTickBatch (10000).
	TickBatch int
	// Known lists the rooms the scheduler ticks and the collector reports:
	// those of the promotions the instance knows to be undrained, from its
	// database (promotion.Manager.KnownRooms). It is called once per
	// round and per scrape; it must be fast, safe for concurrent use and
	// do no I/O. Nothing in Redis lists the rooms: an instance that knows
	// no room sends Redis nothing for them. Defaults to Rooms.Opened, the
	// rooms opened through these Rooms.
	Known func() []Known
	// OnAdmit is called by the scheduler's tick of a room with the users it
	// let in, in order, before the tick returns, for notifying them. It must
	// be fast and safe for concurrent use. Defaults to none.
	OnAdmit func(promotion string, admitted []Admission)
	// OnTick is called by the scheduler after each tick of a room whose
	// lease this instance holds, with what the tick saw (the room's totals
	// and its promotion's state), before the tick returns: a view of the
	// room over time that costs no read of its own. Only the lease holder
	// ticks a room, so only it is called. It must be fast, never block and
	// be safe for concurrent use; it must not modify res. Defaults to none.
	OnTick func(promotion string, res TickResult)
	// Logger receives the scheduler's logs (never tokens or secrets).
	// Defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock challenges are made and checked by (their expiry).
	// Defaults to time.Now.
	Now func() time.Time
	// Layout is the layout of the rooms Open creates (a room keeps the one
	// it was created with): LayoutCompact or LayoutClassic. Defaults to
	// LayoutCompact.
	Layout Layout
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Instance == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.Instance = hex.EncodeToString(b[:])
	}
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers()
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = c.TickInterval * 3 / 2
	}
	if c.TickBatch == 0 {
		c.TickBatch = DefaultTickBatch
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Layout == 0 {
		c.Layout = LayoutCompact
	}
	return c
}

func (c Config) validate() error {
	switch {
	case len(c.Keys) == 0:
		return fmt.Errorf("waitroom: Keys must hold a signing key")
	case c.TickInterval < time.Millisecond:
		return fmt.Errorf("waitroom: TickInterval must be at least 1ms, got %s", c.TickInterval)
	case c.Workers < 1:
		return fmt.Errorf("waitroom: Workers must be at least 1, got %d", c.Workers)
	case c.LeaseTTL < c.TickInterval:
		return fmt.Errorf("waitroom: LeaseTTL must be at least TickInterval (%s), got %s", c.TickInterval, c.LeaseTTL)
	case c.TickBatch < 1:
		return fmt.Errorf("waitroom: TickBatch must be at least 1, got %d", c.TickBatch)
	case c.Layout != LayoutCompact && c.Layout != LayoutClassic:
		return fmt.Errorf("waitroom: Layout must be LayoutCompact (2) or LayoutClassic (1), got %d", c.Layout)
	}
	return nil
}

// Settings are one room's own: the waiting_room object of a promotion.
type Settings struct {
	// AdmitPerSecond is how many users are let in per second, 1..1,000,000.
	// Set when the room is created; Rooms.Apply changes it on a running
	// room. Defaults to DefaultAdmitPerSecond.
	AdmitPerSecond int64
	// MaxActive caps the passes live at once (handed out, neither spent
	// nor expired), 0..MaxActiveCap, 0 for no cap: admission lets in at
	// most MaxActive − live users per tick, whatever the rate. Set when the
	// room is created; Rooms.Apply changes it.
	MaxActive int64
	// Message is shown to everyone in line (Standing.Message): plain text
	// of at most MaxMessageLen characters, no control characters; "" for
	// none. Set when the room is created; Rooms.Apply changes it.
	Message string
	// PowDifficulty asks each join for a proof of work of that many
	// leading zero bits (see Challenge), 0..MaxPowDifficulty, 0 for none.
	// Set when the room is created; Rooms.Apply changes it.
	PowDifficulty int
	// EntryTTL is how long a pass lets its user claim, 1ms..24h. Defaults to
	// DefaultEntryTTL (300s).
	EntryTTL time.Duration
	// AbandonAfter is how long a waiting user keeps the place without
	// checking in (joining again or asking for the status), at least 1ms.
	// Defaults to DefaultAbandonAfter (120s).
	AbandonAfter time.Duration
	// OpensAt is when admission starts counting. Fixed when the room is
	// created. Defaults to the promotion's start (the claim meta's
	// starts_ms), or the time of creation if the promotion is not in Redis.
	OpensAt time.Time
	// PrequeueFrom opens the room's opening moment: from then until
	// OpensAt, joins are collected unordered and, at the first tick at or
	// after OpensAt, shuffled once in the order PrequeueOrder gives with
	// Seed. It must be before OpensAt. Fixed when the room is created.
	// Defaults to none: places in order of joining from the first join.
	PrequeueFrom time.Time
	// Seed is the shuffle's random seed, at least MinSeedLen bytes; required
	// with PrequeueFrom, unused without. Fixed when the room is created.
	Seed []byte
}

func (s Settings) withDefaults() Settings {
	if s.AdmitPerSecond == 0 {
		s.AdmitPerSecond = DefaultAdmitPerSecond
	}
	if s.EntryTTL == 0 {
		s.EntryTTL = DefaultEntryTTL
	}
	if s.AbandonAfter == 0 {
		s.AbandonAfter = DefaultAbandonAfter
	}
	return s
}

func (s Settings) validate() error {
	switch {
	case s.AdmitPerSecond < 1 || s.AdmitPerSecond > MaxAdmitPerSecond:
		return fmt.Errorf("waitroom: AdmitPerSecond must be 1..%d, got %d", MaxAdmitPerSecond, s.AdmitPerSecond)
	case s.EntryTTL < time.Millisecond || s.EntryTTL > MaxEntryTTL:
		return fmt.Errorf("waitroom: EntryTTL must be 1ms..%s, got %s", MaxEntryTTL, s.EntryTTL)
	case s.AbandonAfter < time.Millisecond:
		return fmt.Errorf("waitroom: AbandonAfter must be at least 1ms, got %s", s.AbandonAfter)
	case s.MaxActive < 0 || s.MaxActive > MaxActiveCap:
		return fmt.Errorf("waitroom: MaxActive must be 0..%d, got %d", MaxActiveCap, s.MaxActive)
	case s.PowDifficulty < 0 || s.PowDifficulty > MaxPowDifficulty:
		return fmt.Errorf("waitroom: PowDifficulty must be 0..%d, got %d", MaxPowDifficulty, s.PowDifficulty)
	case CheckMessage(s.Message) != nil:
		return CheckMessage(s.Message)
	case s.PrequeueFrom.IsZero():
	case len(s.Seed) < MinSeedLen:
		return fmt.Errorf("waitroom: Seed must hold at least %d bytes with PrequeueFrom, got %d", MinSeedLen, len(s.Seed))
	case !s.OpensAt.IsZero() && !s.PrequeueFrom.Before(s.OpensAt):
		return fmt.Errorf("waitroom: PrequeueFrom (%s) must be before OpensAt (%s)", s.PrequeueFrom, s.OpensAt)
	}
	return nil
}
