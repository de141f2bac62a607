package bench

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dibsio/dibs/ident"
)

// Defaults for [Config]. The stock, user and wave numbers are those of the
// seed scenario: 1,000 stock, 2,000 users.
const (
	DefaultStock          = 1000
	DefaultUsers          = 2000
	DefaultPerUserLimit   = 1
	DefaultConcurrency    = 200
	DefaultRepeat         = 1
	DefaultUserPrefix     = "user-"
	DefaultConfirmTimeout = 60 * time.Second
	DefaultPollInterval   = 20 * time.Millisecond
	DefaultRequestTimeout = 30 * time.Second
	DefaultSpotChecks     = 20
	// DefaultAdmitPerSecond is the waiting room's admission rate: 2,000
	// users and 1,000 stock go through in about five seconds.
	DefaultAdmitPerSecond = 200
	// DefaultMaxPoll caps the pause between a waiting user's status
	// lookups, whatever poll_after_ms says, so a run stays short.
	DefaultMaxPoll = time.Second
	// DefaultRoomTimeout bounds the waiting-room part of a run.
	DefaultRoomTimeout = 2 * time.Minute
)

// MaxRoomUsers bounds the users of a waiting-room run: each one is a
// goroutine for the whole run (their requests in flight are bounded by
// Concurrency).
const MaxRoomUsers = 100_000

// MaxConcurrency bounds the number of claims in flight at once (workers in a
// steady run, the size of a wave in a wave run): each one holds a goroutine
// and a connection.
const MaxConcurrency = 10000

// ErrInvalidConfig is wrapped by the error [Run] returns for a bad [Config];
// the message names the field.
var ErrInvalidConfig = errors.New("bench: invalid config")

// Config says what [Run] does. Target and AdminToken are required.
type Config struct {
	// Target is the base URL of the dibs server, e.g. http://127.0.0.1:8080.
	Target string
	// AdminToken is the bearer token for the admin endpoints, used to create
	// the promotion.
	AdminToken string
	// PromotionID is the id of the promotion to create. Defaults to
	// "bench-" followed by the time and a random suffix.
	PromotionID string
	// Stock is the promotion's stock. Defaults to DefaultStock.
	Stock int
	// Users is the number of distinct users that claim. Defaults to
	// DefaultUsers.
	Users int
	// PerUserLimit is the promotion's per_user_limit. Defaults to
	// DefaultPerUserLimit.
	PerUserLimit int
	// Repeat is how many times every user claims; round r starts after
	// round r-1 was handed out. Defaults to DefaultRepeat.
	Repeat int
	// Waves, when above zero, splits the Users×Repeat claims into this many
	// waves of (nearly) equal size: all requests of a wave are released
	// together behind a barrier and the next wave starts when every request
	// of the previous one has its answer. Zero runs the claims as a steady
	// stream from Concurrency workers instead. Defaults to 0.
	Waves int
	// Concurrency is the number of workers of a steady run (ignored when
	// Waves is set). At most MaxConcurrency. Defaults to DefaultConcurrency.
	Concurrency int
	// UserPrefix is prepended to the user number (1-based) to make user ids;
	// it must itself be a valid identifier. Defaults to DefaultUserPrefix.
	UserPrefix string
	// ConfirmTimeout bounds the wait for every accepted claim to be issued.
	// Defaults to DefaultConfirmTimeout.
	ConfirmTimeout time.Duration
	// PollInterval is the pause between reads of the promotion's counts
	// while waiting for confirmation; it is also the resolution of the
	// measured time until all claims are issued. Defaults to
	// DefaultPollInterval.
	PollInterval time.Duration
	// RequestTimeout bounds each HTTP request. Defaults to
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// SpotChecks is the number of users whose claim status is read back one
	// by one after confirmation (half of them accepted users, half users
	// that got nothing). Negative disables the spot check. Defaults to
	// DefaultSpotChecks.
	SpotChecks int
	// HTTPClient sends the requests. Defaults to a client tuned for the run:
	// keep-alive with as many idle connections per host as claims in flight.
	HTTPClient *http.Client
	// Progress receives one human-readable line per wave (or per tenth of a
	// steady run, or per second of a waiting-room run) and for the
	// confirmation. Defaults to io.Discard.
	Progress io.Writer

	// WaitingRoom runs the users through the promotion's waiting room: each
	// joins (POST …/queue), follows its status (GET …/queue/{user}) as
	// poll_after_ms says, capped at MaxPoll, and claims with the entry
	// token once admitted. Concurrency bounds the requests in flight;
	// Waves must be 0 and Repeat 1. Defaults to false.
	WaitingRoom bool
	// AdmitPerSecond is the room's admission rate. Defaults to
	// DefaultAdmitPerSecond.
	AdmitPerSecond int
	// PowDifficulty is the room's proof-of-work difficulty, set when the
	// run creates the promotion (0..MaxPowDifficulty): every join is
	// answered challenge_required first, and the user solves the challenge
	// (client.SolveChallenge, on one core) and joins again with the
	// solution; the report gives the solves' times. Defaults to 0, none.
	PowDifficulty int
	// MaxPoll caps the pause between a waiting user's status lookups.
	// Defaults to DefaultMaxPoll.
	MaxPoll time.Duration
	// RoomTimeout bounds the waiting-room part of the run; users still in
	// line then count as timed out. Defaults to DefaultRoomTimeout.
	RoomTimeout time.Duration
	// RateSampleInterval is the pause between reads of the promotion's
	// admitted count, from which the admission rate is measured. Defaults
	// to DefaultRateSampleInterval.
	RateSampleInterval time.Duration
}

// MaxPowDifficulty is the highest proof-of-work difficulty a room takes,
// in leading zero bits of SHA-256.
const MaxPowDifficulty = 24

// DefaultRateSampleInterval is how often a waiting-room run reads the
// admitted count to measure the admission rate.
const DefaultRateSampleInterval = 50 * time.Millisecond

// Validate reports whether [Run] would accept c, with the defaults applied.
// The error wraps [ErrInvalidConfig] and names the field.
func (c Config) Validate() error { return c.withDefaults().validate() }

func (c Config) withDefaults() Config {
	if c.Stock == 0 {
		c.Stock = DefaultStock
	}
	if c.Users == 0 {
		c.Users = DefaultUsers
	}
	if c.PerUserLimit == 0 {
		c.PerUserLimit = DefaultPerUserLimit
	}
	if c.Repeat == 0 {
		c.Repeat = DefaultRepeat
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.UserPrefix == "" {
		c.UserPrefix = DefaultUserPrefix
	}
	if c.ConfirmTimeout == 0 {
		c.ConfirmTimeout = DefaultConfirmTimeout
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.SpotChecks == 0 {
		c.SpotChecks = DefaultSpotChecks
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.AdmitPerSecond == 0 {
		c.AdmitPerSecond = DefaultAdmitPerSecond
	}
	if c.MaxPoll == 0 {
		c.MaxPoll = DefaultMaxPoll
	}
	if c.RoomTimeout == 0 {
		c.RoomTimeout = DefaultRoomTimeout
	}
	if c.RateSampleInterval == 0 {
		c.RateSampleInterval = DefaultRateSampleInterval
	}
	c.Target = strings.TrimRight(c.Target, "/")
	return c
}

// validate checks c, the defaults applied: its target, its claims, its
// timeouts and its waiting room, and says the first field that is wrong.
func (c Config) validate() error {
	for _, check := range []func() error{c.checkTarget, c.checkClaims, c.checkTimeouts, c.checkRoom} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// invalid is the error for a field that is wrong.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// checkTarget checks the server and the promotion the run is sent to.
func (c Config) checkTarget() error {
	u, err := url.Parse(c.Target)
	switch {
	case c.Target == "":
		return invalid("Target", "is required")
	case err != nil:
		return invalid("Target", "%q is not a URL: %v", c.Target, err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return invalid("Target", "%q must be http://HOST:PORT or https://HOST:PORT", c.Target)
	}
	if c.AdminToken == "" {
		return invalid("AdminToken", "is required")
	}
	if c.PromotionID != "" && !ident.Valid(c.PromotionID) {
		return invalid("PromotionID", "%q must be "+ident.Rule, c.PromotionID)
	}
	return nil
}

// checkClaims checks the promotion's stock and the claims sent to it: by
// whom, how many and how many at once.
func (c Config) checkClaims() error {
	if c.Stock < 1 || c.Stock > 1_000_000_000 {
		return invalid("Stock", "must be 1..1,000,000,000, got %d", c.Stock)
	}
	if c.Users < 1 {
		return invalid("Users", "must be at least 1, got %d", c.Users)
	}
	if c.PerUserLimit < 1 || c.PerUserLimit > 1000 {
		return invalid("PerUserLimit", "must be 1..1,000, got %d", c.PerUserLimit)
	}
	if c.Repeat < 1 {
		return invalid("Repeat", "must be at least 1, got %d", c.Repeat)
	}
	if c.Waves < 0 {
		return invalid("Waves", "must not be negative, got %d", c.Waves)
	}
	if c.Waves > c.Users*c.Repeat {
		return invalid("Waves", "%d is more than the %d claims to send", c.Waves, c.Users*c.Repeat)
	}
	if c.Waves > 0 {
		if size := ceilDiv(c.Users*c.Repeat, c.Waves); size > MaxConcurrency {
			return invalid("Waves", "%d makes waves of %d claims, more than %d in flight", c.Waves, size, MaxConcurrency)
		}
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		return invalid("Concurrency", "must be 1..%d, got %d", MaxConcurrency, c.Concurrency)
	}
	if !ident.Valid(c.UserPrefix + fmt.Sprint(c.Users)) {
		return invalid("UserPrefix", "%q does not make valid user ids", c.UserPrefix)
	}
	return nil
}

// checkTimeouts checks the waits outside the waiting room.
func (c Config) checkTimeouts() error {
	if c.ConfirmTimeout < 0 {
		return invalid("ConfirmTimeout", "must not be negative, got %v", c.ConfirmTimeout)
	}
	if c.PollInterval < 0 {
		return invalid("PollInterval", "must not be negative, got %v", c.PollInterval)
	}
	if c.RequestTimeout < 0 {
		return invalid("RequestTimeout", "must not be negative, got %v", c.RequestTimeout)
	}
	return nil
}

// checkRoom checks the waiting room's fields, and the claims' fields that
// a room rules out.
func (c Config) checkRoom() error {
	if !c.WaitingRoom {
		if c.PowDifficulty != 0 {
			return invalid("PowDifficulty", "needs WaitingRoom, got %d", c.PowDifficulty)
		}
		return nil
	}
	switch {
	case c.Waves != 0:
		return invalid("Waves", "must be 0 with WaitingRoom: the room paces the users, got %d", c.Waves)
	case c.Repeat != 1:
		return invalid("Repeat", "must be 1 with WaitingRoom, got %d", c.Repeat)
	case c.Users > MaxRoomUsers:
		return invalid("Users", "must be at most %d with WaitingRoom, got %d", MaxRoomUsers, c.Users)
	case c.AdmitPerSecond < 1 || c.AdmitPerSecond > 1_000_000:
		return invalid("AdmitPerSecond", "must be 1..1,000,000, got %d", c.AdmitPerSecond)
	case c.PowDifficulty < 0 || c.PowDifficulty > MaxPowDifficulty:
		return invalid("PowDifficulty", "must be 0..%d, got %d", MaxPowDifficulty, c.PowDifficulty)
	case c.MaxPoll < time.Millisecond:
		return invalid("MaxPoll", "must be at least 1ms, got %v", c.MaxPoll)
	case c.RoomTimeout < 0:
		return invalid("RoomTimeout", "must not be negative, got %v", c.RoomTimeout)
	case c.RateSampleInterval < time.Millisecond:
		return invalid("RateSampleInterval", "must be at least 1ms, got %v", c.RateSampleInterval)
	}
	return nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
