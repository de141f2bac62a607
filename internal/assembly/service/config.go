package service

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/httpapi/edge"
	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/stream"
	"github.com/dibsio/dibs/waitroom"
)

// Defaults of the settings dibs serve also takes as flags.
const (
	// DefaultAddr is the HTTP listen address.
	DefaultAddr = "127.0.0.1:8080"
	// DefaultDB is the database: a SQLite file in the working directory.
	DefaultDB = "sqlite://dibs.db"
	// DefaultDataDir is the data directory of the embedded redis-server.
	DefaultDataDir = "dibs-data"
)

// Config is what the service runs with. Its YAML form is the file given to
// dibs serve with --config (docs/tuning.md); the fields without a YAML name
// come from flags and the environment only. Start from DefaultConfig or
// LoadFile: the zero Stream leaves trim_acked off.
type Config struct {
	// Addr is the HTTP listen address; port 0 picks a free port. Defaults
	// to DefaultAddr.
	Addr string `yaml:"addr"`
	// Redis is a redis:// or rediss:// URL, or a comma list of host:port
	// seeds of a Redis Cluster (--redis). Empty starts a private
	// redis-server in DataDir: the embedded default.
	Redis string `yaml:"redis"`
	// DB is the database URL, sqlite://PATH or postgres://... Defaults to
	// DefaultDB.
	DB string `yaml:"db"`
	// DataDir is the data directory of the embedded redis-server
	// (--data-dir). Defaults to DefaultDataDir.
	DataDir string `yaml:"data_dir"`
	// Stream tunes the promotions' confirmation pools; its Hooks are the
	// service's metrics. Defaults to stream.DefaultConfig() in
	// DefaultConfig and LoadFile.
	Stream stream.Config `yaml:"stream"`
	// HTTP tunes the API. Zero fields keep the API's defaults.
	HTTP HTTPConfig `yaml:"http"`
	// Edge guards the claim and waiting-room endpoints for callers facing
	// browsers: trusted proxies, rate limits, user tokens, CORS. Defaults
	// to all of it off. DIBS_USER_TOKEN_SECRET and
	// DIBS_USER_TOKEN_PUBLIC_KEY win over the file (see LoadFile).
	Edge edge.Config `yaml:"edge"`
	// EmbeddedRedis tunes the embedded redis-server.
	EmbeddedRedis EmbeddedRedisConfig `yaml:"embedded_redis"`
	// WaitingRoom runs the waiting rooms: the scheduler's tick and workers
	// and the secret that signs entry tokens. DIBS_WAITROOM_SECRET wins over
	// the file (see LoadFile).
	WaitingRoom WaitingRoomConfig `yaml:"waiting_room"`
	// Issue configures what claims receive: the alphabet and length of
	// coupon and voucher codes, how long a voucher is valid, and the
	// webhook issuer (webhook_secret, which DIBS_WEBHOOK_SECRET wins over,
	// and the webhook: block of timeouts, concurrency and backoff). Defaults
	// to issue.DefaultAlphabet, issue.DefaultCodeLength and
	// issue.DefaultVoucherValidDays; without a webhook secret, promotions
	// of kind webhook are refused at creation.
	Issue issue.Config `yaml:"issue"`
	// Admin holds the named admin tokens and the secret of erased users'
	// tokens. DIBS_ERASE_SECRET wins over the file (see LoadFile).
	Admin AdminConfig `yaml:"admin"`
	// Events delivers the outbox's events to webhook subscribers and sets
	// how long they are kept. Subscribers' secrets in the environment
	// (EnvEventsSecretPrefix) win over the file.
	Events EventsConfig `yaml:"events"`
	// Promotions tunes the promotions' lifecycle: how long a drained
	// promotion keeps its Redis state, and how long a sold-out one is
	// answered from memory.
	Promotions PromotionsConfig `yaml:"promotions"`

	// AdminToken is the bearer token of the admin endpoints. Defaults to a
	// random one, logged once at start.
	AdminToken string `yaml:"-"`
	// Instance names this process's stream consumers; a restarted instance
	// with the same name resumes its own pending entries. Defaults to
	// DefaultInstance().
	Instance string `yaml:"-"`
	// Failpoint names a crash hook for crash tests with real processes:
	// "crash-after-commit:N" kills the process with SIGKILL once N claims
	// were committed to the database, before they are acknowledged in
	// Redis. Defaults to none.
	Failpoint string `yaml:"-"`
	// Logger receives the logs of the service and of every part of it (the
	// stream runtime, the promotion manager, the waiting rooms, the hint
	// bus, the API, the embedded redis-server's output): Stream.Logger is
	// set to it. Defaults to slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// ConfigFile names the file the configuration was read from, for the
	// start line of the log. Defaults to none.
	ConfigFile string `yaml:"-"`
}

// HTTPConfig is the `http:` section of the file; zero means the API's
// default.
type HTTPConfig struct {
	// MaxInFlight bounds concurrent claim and grant requests.
	MaxInFlight int `yaml:"max_in_flight"`
	// ClaimTimeoutMS is the deadline of one claim's Redis call.
	ClaimTimeoutMS int `yaml:"claim_timeout_ms"`
	// MaxConns caps the connections the instance holds open at once;
	// further clients wait in the kernel's accept queue.
	MaxConns int `yaml:"max_conns"`
	// ReadTimeoutMS and WriteTimeoutMS are the deadlines of a request that
	// is not streamed.
	ReadTimeoutMS  int `yaml:"read_timeout_ms"`
	WriteTimeoutMS int `yaml:"write_timeout_ms"`
	// StreamIdleTimeoutMS is how far each line or event of a streamed
	// request pushes its deadlines ahead.
	StreamIdleTimeoutMS int `yaml:"stream_idle_timeout_ms"`
	// MaxStreams bounds concurrent streamed requests.
	MaxStreams int `yaml:"max_streams"`
	// IdempotencyTTLSeconds is how long an admin request's answer is kept
	// for retries with its Idempotency-Key.
	IdempotencyTTLSeconds int `yaml:"idempotency_ttl_seconds"`
	// AccessLog logs one line per answered request (method, route, path,
	// status, bytes, took_ms, remote). Defaults to off.
	AccessLog bool `yaml:"access_log"`
}

// EmbeddedRedisConfig is the `embedded_redis:` section of the file.
type EmbeddedRedisConfig struct {
	// AppendFsync is the embedded redis-server's appendfsync: everysec or
	// always. Defaults to everysec.
	AppendFsync string `yaml:"appendfsync"`
}

// EnvWebhookSecret is the environment variable of the webhook issuer's
// signing secret (issue.webhook_secret); it wins over the file.
const EnvWebhookSecret = "DIBS_WEBHOOK_SECRET"

// EnvWaitroomSecret is the environment variable of the entry tokens'
// signing keys, in the form of WaitingRoomConfig.Secret; it wins over the
// file.
const EnvWaitroomSecret = "DIBS_WAITROOM_SECRET"

// WaitingRoomConfig is the `waiting_room:` section of the file; zero means
// the default.
type WaitingRoomConfig struct {
	// TickMS is how often the scheduler advances admission in every active
	// room, in ms. Defaults to 1000.
	TickMS int `yaml:"tick_ms"`
	// Workers is the size of the scheduler's worker pool. Defaults to 2 ×
	// GOMAXPROCS.
	Workers int `yaml:"workers"`
	// Secret holds the keys that sign and verify entry tokens: "id:base64"
	// with at least 32 random bytes, or two during a rotation,
	// "new:…,old:…" (see docs/waitroom.md); every instance must hold the
	// same. Best given as DIBS_WAITROOM_SECRET. Empty: a random key is
	// made at start and logged as such; its passes verify on this instance
	// only.
	Secret string `yaml:"secret"`
}

// PromotionsConfig is the `promotions:` section of the file; zero means
// the default.
type PromotionsConfig struct {
	// Retention is how long a promotion keeps its Redis state after it
	// ended and drained, as a Go duration ("168h", "30m"); then it is
	// retired: its Redis keys and streams are deleted and the database
	// answers for it (see docs/durability.md). 1m..87600h. Defaults to
	// promotion.DefaultRetention (168h).
	Retention time.Duration `yaml:"retention"`
	// SoldOutMemoryMS is how long, in ms, an instance answers claims of a
	// sold-out or ended promotion from memory, without a Redis call
	// (docs/tuning.md); 0 turns the memory off. 0..60000. Defaults to
	// promotion.DefaultSoldOutMemory (1000) when absent.
	SoldOutMemoryMS *int `yaml:"soldout_memory_ms"`
	// ClassicClaims makes the promotions this instance creates keep their
	// claims in Redis in the classic layout of earlier releases instead of
	// the compact one (docs/operations.md, Upgrading): set it while
	// instances of a release before the compact layout still run, which
	// answer wrong_mode to a compact promotion. A promotion keeps the
	// layout it was created with. Defaults to false (compact).
	ClassicClaims bool `yaml:"classic_claims"`
	// JournalMiB is the memory, in MiB, of the journal of claims this
	// instance answered and has not seen confirmed, kept to put them back
	// if Redis loses them (docs/durability.md). 1..65536. Defaults to
	// promotion.DefaultJournalBytes (64 MiB).
	JournalMiB int `yaml:"journal_mib"`
	// IdleRecheckSeconds is how often an idle promotion is re-checked in
	// full (docs/tuning.md). 1..86400. Defaults to
	// promotion.DefaultIdleRecheckInterval (600).
	IdleRecheckSeconds int `yaml:"idle_recheck_seconds"`
	// BatchClaims sends the claims of a promotion without a waiting room
	// that queue up while one of its claim calls is in flight to Redis
	// together, in one call (docs/tuning.md): false runs each claim in a
	// call of its own. Defaults to true when absent.
	BatchClaims *bool `yaml:"batch_claims"`
}

// unbatchedClaims is BatchClaims as promotion.Config.UnbatchedClaims.
func (p PromotionsConfig) unbatchedClaims() bool {
	return p.BatchClaims != nil && !*p.BatchClaims
}

// soldOutMemory is SoldOutMemoryMS as promotion.Config.SoldOutMemory.
func (p PromotionsConfig) soldOutMemory() time.Duration {
	switch {
	case p.SoldOutMemoryMS == nil:
		return 0 // the default
	case *p.SoldOutMemoryMS == 0:
		return -1 // off
	}
	return time.Duration(*p.SoldOutMemoryMS) * time.Millisecond
}

// validate names the first key that cannot work.
func (p PromotionsConfig) validate() error {
	if p.Retention != 0 && (p.Retention < time.Minute || p.Retention > 87600*time.Hour) {
		return fmt.Errorf("promotions.retention must be 1m..87600h, got %s", p.Retention)
	}
	if ms := p.SoldOutMemoryMS; ms != nil && (*ms < 0 || *ms > 60_000) {
		return fmt.Errorf("promotions.soldout_memory_ms must be 0..60000, got %d", *ms)
	}
	if p.JournalMiB < 0 || p.JournalMiB > 65_536 {
		return fmt.Errorf("promotions.journal_mib must be 1..65536, got %d", p.JournalMiB)
	}
	if p.IdleRecheckSeconds < 0 || p.IdleRecheckSeconds > 86_400 {
		return fmt.Errorf("promotions.idle_recheck_seconds must be 1..86400, got %d", p.IdleRecheckSeconds)
	}
	return nil
}

// validate names the first key that cannot work.
func (w WaitingRoomConfig) validate() error {
	switch {
	case w.TickMS < 0 || w.TickMS > 60_000:
		return fmt.Errorf("waiting_room.tick_ms must be 0..60000, got %d", w.TickMS)
	case w.Workers < 0 || w.Workers > 10_000:
		return fmt.Errorf("waiting_room.workers must be 0..10000, got %d", w.Workers)
	}
	if w.Secret != "" {
		keys, err := waitroom.ParseKeys(w.Secret)
		if err == nil {
			_, err = waitroom.NewSigner(keys...)
		}
		if err != nil {
			return fmt.Errorf("waiting_room.secret (or %s): %w", EnvWaitroomSecret, err)
		}
	}
	return nil
}

// MinCodeBits is the least randomness a code may carry in dibs serve:
// guessing one of a million issued codes then takes over a million tries
// per hit on average.
const MinCodeBits = 40

// validateIssue names the first key of the issue: section that cannot
// work: what issue.Config.Validate refuses, and codes too easy to guess.
func validateIssue(c issue.Config) error {
	if err := c.Validate(); err != nil {
		return inFileTerms("issue", issueKeys, err)
	}
	if bits := c.Codes.Bits(); bits < MinCodeBits {
		return fmt.Errorf("issue.codes: %.1f bits of randomness ((length-1) × log2(alphabet size)), want at least %d: lengthen the codes or widen the alphabet", bits, MinCodeBits)
	}
	return nil
}

// DefaultConfig is the configuration of a file that sets nothing.
func DefaultConfig() Config {
	return Config{Stream: stream.DefaultConfig()}
}

// LoadFile reads the YAML file at path over DefaultConfig; unknown keys
// are errors. An empty path is DefaultConfig. The user-token secret or
// public key in the environment (DIBS_USER_TOKEN_SECRET,
// DIBS_USER_TOKEN_PUBLIC_KEY) and the entry tokens' keys
// (DIBS_WAITROOM_SECRET) and the webhook secret (DIBS_WEBHOOK_SECRET)
// win over the file.
func LoadFile(path string) (Config, error) {
	c, err := loadFile(path)
	c.Edge.ApplyEnv(nil)
	if v := os.Getenv(EnvWaitroomSecret); v != "" {
		c.WaitingRoom.Secret = v
	}
	if v := os.Getenv(EnvEraseSecret); v != "" {
		c.Admin.EraseSecret = v
	}
	if v := os.Getenv(EnvWebhookSecret); v != "" {
		c.Issue.WebhookSecret = v
		if err == nil {
			if verr := validateIssue(c.Issue); verr != nil {
				err = fmt.Errorf("%s: %w", EnvWebhookSecret, verr)
			}
		}
	}
	return c, err
}

func loadFile(path string) (Config, error) {
	c := DefaultConfig()
	if path == "" {
		return c, nil
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("config %s: %w", path, decodeError(src, err))
	}
	if err := c.EmbeddedRedis.validate(); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if err := c.HTTP.validate(); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if err := c.WaitingRoom.validate(); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if err := checkStreamZeros(src); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if err := checkStreamConfig(c.Stream); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if err := validateIssue(c.Issue); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if err := c.Admin.validate(); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	c.Events.applyEnv()
	if err := c.Events.validate(); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if err := c.Promotions.validate(); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// withDefaults fills in the zero values.
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.DB == "" {
		c.DB = DefaultDB
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.EmbeddedRedis.AppendFsync == "" {
		c.EmbeddedRedis.AppendFsync = "everysec"
	}
	if c.Instance == "" {
		c.Instance = DefaultInstance()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	// Lines a request causes anywhere (the promotion manager, say) carry
	// its request_id.
	c.Logger = slog.New(httpapi.LogHandler(c.Logger.Handler()))
	// One logger for every part: the stream runtime's default
	// (slog.Default(), which DefaultConfig's Stream holds) is replaced too.
	c.Stream.Logger = c.Logger
	return c
}

// validate reports the first setting that cannot work, naming it. It needs
// neither Redis nor the database.
func (c Config) validate() error {
	if _, _, err := redisOptions(c.Redis); err != nil {
		return err
	}
	if err := checkStreamConfig(c.Stream); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.EmbeddedRedis.validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.HTTP.validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.Edge.Validate(); err != nil {
		return fmt.Errorf("config: %w", edgeInFileTerms(err))
	}
	if err := c.WaitingRoom.validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.Admin.validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.Events.validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.Promotions.validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if _, err := failpoint(c.Failpoint); err != nil {
		return err
	}
	return nil
}

// DefaultInstance is the default instance name: the host name, else "dibs".
func DefaultInstance() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "dibs"
	}
	return h
}

func (e EmbeddedRedisConfig) validate() error {
	switch e.AppendFsync {
	case "", "everysec", "always":
		return nil
	}
	return errors.New("embedded_redis.appendfsync must be everysec or always")
}

// validate names the first key that cannot work.
func (h HTTPConfig) validate() error {
	const none = 0 // not a duration
	for _, v := range []struct {
		key  string
		n    int
		unit time.Duration
	}{
		{"max_in_flight", h.MaxInFlight, none}, {"claim_timeout_ms", h.ClaimTimeoutMS, time.Millisecond},
		{"max_conns", h.MaxConns, none},
		{"read_timeout_ms", h.ReadTimeoutMS, time.Millisecond}, {"write_timeout_ms", h.WriteTimeoutMS, time.Millisecond},
		{"stream_idle_timeout_ms", h.StreamIdleTimeoutMS, time.Millisecond}, {"max_streams", h.MaxStreams, none},
		{"idempotency_ttl_seconds", h.IdempotencyTTLSeconds, time.Second},
	} {
		if v.n < 0 {
			return fmt.Errorf("http.%s must not be negative, got %d", v.key, v.n)
		}
		if v.unit != none && int64(v.n) > math.MaxInt64/int64(v.unit) {
			return fmt.Errorf("http.%s is too large, got %d", v.key, v.n)
		}
	}
	return nil
}

// apply sets the API's tunables from h.
func (h HTTPConfig) apply(c *httpapi.Config) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	c.MaxInFlight = h.MaxInFlight
	c.ClaimTimeout = ms(h.ClaimTimeoutMS)
	c.ReadTimeout = ms(h.ReadTimeoutMS)
	c.WriteTimeout = ms(h.WriteTimeoutMS)
	c.StreamIdleTimeout = ms(h.StreamIdleTimeoutMS)
	c.MaxStreams = h.MaxStreams
	c.IdempotencyTTL = time.Duration(h.IdempotencyTTLSeconds) * time.Second
	c.AccessLog = h.AccessLog
}
