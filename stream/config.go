package stream

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ReadMode says how consumers wait for new entries.
type ReadMode string

// Read modes.
const (
	// ReadBlock waits inside Redis with XREADGROUP BLOCK.
	ReadBlock ReadMode = "block"
	// ReadPoll reads without BLOCK (for servers that forbid it) and sleeps
	// after an empty read, with a backoff that starts short.
	ReadPoll ReadMode = "poll"
)

// Defaults of [Config], named after the seeds' properties.
const (
	DefaultBatchSize                = 100
	DefaultBatchWait                = 5 * time.Millisecond
	DefaultTrimAcked                = true
	DefaultReadMode                 = ReadBlock
	DefaultBlock                    = 2000 * time.Millisecond
	DefaultPollInterval             = 100 * time.Millisecond
	DefaultIdleTimeout              = 30 * time.Second
	DefaultMinConsumers             = 1
	DefaultMaxConsumers             = 32
	DefaultConsecutiveActiveTrigger = 10
	DefaultConsecutiveIdleTrigger   = 10
	DefaultStartConsumerMinInterval = 2 * time.Second
	DefaultStopConsumerMinInterval  = 60 * time.Second
	DefaultReclaimMinIdle           = 30 * time.Second
	DefaultMaxDeliveries            = 5
	DefaultDeadLetterMaxLen         = 10000
	DefaultMaxBlockingConns         = 64
	DefaultLeaseTTL                 = 15 * time.Second
	// DefaultExpectedPerConsumer is how many expected entries justify one more
	// initial consumer (see InitialConsumers).
	DefaultExpectedPerConsumer = 1000
)

// Clock tells the time. Tests inject a fake one; the default is the wall
// clock.
type Clock interface {
	Now() time.Time
	// After sends the time on the returned channel once d has passed.
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Hooks report what the runtime does, for metrics. Every field is optional;
// the functions are called synchronously from consumer goroutines and must be
// fast.
type Hooks struct {
	// Read is called after every read of new entries with the number of
	// entries returned (0 for an empty read). A read is one XREADGROUP, or
	// several in a row when BatchSize is over 100 (no XREADGROUP asks for
	// more than 100 entries).
	Read func(stream string, entries int)
	// Ack is called after entries were acknowledged as handled.
	Ack func(stream string, entries int)
	// Failure is called for each failed entry or runtime error; kind is one of
	// the Failure… constants.
	Failure func(stream string, kind string)
	// DeadLetter is called for each entry written to the dead-letter stream.
	DeadLetter func(stream string, reason string)
	// Consumers is called with the pool's consumer count whenever it changes.
	Consumers func(stream string, n int)
	// Lag is called when the runtime samples the group (on each reclaim pass
	// and idle check): entries not yet delivered (-1 if Redis cannot tell)
	// and entries delivered but not acknowledged.
	Lag func(stream string, lag, pending int64)
}

// Config tunes pools. The YAML names are those of the `stream:` section of
// the dibs configuration; durations are whole milliseconds (or seconds where
// the name says so) in YAML.
type Config struct {
	// BatchSize is the most entries one read hands to the handler. One
	// XREADGROUP asks for at most 100 entries (its COUNT), so a bigger batch
	// is read with several in a row, without blocking, while each comes back
	// full. Defaults to 100.
	BatchSize int `yaml:"batch_size"`
	// BatchWait lets batches fill under a steady load: after a read that
	// returned some entries but fewer than BatchSize, the consumer waits
	// until BatchWait has passed since the read returned, then reads once
	// more without blocking for up to the rest of a batch, and hands the
	// handler one batch of both reads. A full read is handled at once. The
	// entries of a partial read thus reach the handler up to BatchWait
	// later, and every per-batch cost (the read, the acknowledgement, a
	// database transaction) is shared by the entries that arrive meanwhile.
	// While the consumer waits it keeps the pool's reading role: no other
	// consumer is woken to read the entries that arrive during the wait.
	//
	// For scaling and waking, the merged batch counts as its first read
	// did: partial, even when the second read fills it, since entries the
	// consumer chose to wait for are not a backlog (a backlog shows as
	// reads that come back full at once, which are handled without a
	// wait). So a pool under a load it keeps up with counts partial reads
	// towards ConsecutiveIdleTrigger, and adds consumers only when reads
	// come back full. Hooks.Read reports each of the two reads. Stopping
	// the pool, or this consumer (scale-down), ends the wait at once: the
	// handler gets what the first read returned.
	//
	// 0 turns the wait off. It must not be negative, and BatchWait plus
	// twice HandlerTimeout must stay under ReclaimMinIdle, so entries
	// waiting for their batch are not reclaimed. Defaults to 5ms (in
	// DefaultConfig; the zero Config leaves it off).
	BatchWait time.Duration `yaml:"-"`
	// TrimAcked trims acknowledged entries with XTRIM MINID ~ below the oldest
	// pending or undelivered entry of every group, on each reclaim pass:
	// whole stream nodes, at most 5,000 entries per XTRIM and 64 XTRIMs per
	// pass. Unfinished entries are never trimmed. Defaults to true (in
	// DefaultConfig; the zero Config leaves it off).
	TrimAcked bool `yaml:"trim_acked"`
	// ReadMode is ReadBlock or ReadPoll. Defaults to ReadBlock.
	ReadMode ReadMode `yaml:"read_mode"`
	// Block is how long one XREADGROUP BLOCK waits (block mode). Defaults to 2s.
	Block time.Duration `yaml:"-"`
	// PollInterval is the longest sleep after an empty read (poll mode, and
	// block mode when no blocking connection is free). Defaults to 100ms.
	PollInterval time.Duration `yaml:"-"`
	// IdleTimeout stops a pool after this long without a message, once its
	// group has nothing pending and no lag. A negative value never stops.
	// Defaults to 30s.
	IdleTimeout time.Duration `yaml:"-"`
	// MinConsumers is the fewest consumers a pool runs in this process.
	// Defaults to 1.
	MinConsumers int `yaml:"min_consumers_per_instance"`
	// MaxConsumers is the most consumers a pool runs in this process.
	// Defaults to 32.
	MaxConsumers int `yaml:"max_consumers_per_instance"`
	// ConsecutiveActiveTrigger is how many consecutive full batches make the
	// pool consider adding a consumer. Defaults to 10.
	ConsecutiveActiveTrigger int `yaml:"consecutive_active_trigger"`
	// ConsecutiveIdleTrigger is how many consecutive empty or partial reads
	// make the pool consider stopping a consumer. Defaults to 10.
	ConsecutiveIdleTrigger int `yaml:"consecutive_idle_trigger"`
	// StartConsumerMinInterval is the least time between two consumer starts
	// by scaling. Defaults to 2s.
	StartConsumerMinInterval time.Duration `yaml:"-"`
	// StopConsumerMinInterval is the least time between two consumer stops by
	// scaling. Defaults to 60s.
	StopConsumerMinInterval time.Duration `yaml:"-"`
	// ReclaimMinIdle is the reclaim's min-idle-time: an entry pending this
	// long is taken over (from a dead consumer, or retried after a failure).
	// The reclaim looks only at pending entries added at least this long
	// ago by Redis's clock (see the package documentation). Defaults to 30s.
	ReclaimMinIdle time.Duration `yaml:"-"`
	// ReclaimInterval is how often a pool runs its reclaim pass (and trims,
	// and samples lag). Defaults to ReclaimMinIdle / 6.
	ReclaimInterval time.Duration `yaml:"-"`
	// MaxDeliveries is how many handler calls for an entry may fail with an
	// error of no kind (or panic) before it is dead-lettered; the count is
	// kept in Redis (FailuresKey). Redeliveries that are not such failures —
	// restarts, reclaims, transient errors during an outage of any length —
	// do not count. Defaults to 5.
	MaxDeliveries int64 `yaml:"max_deliveries"`
	// DeadLetterMaxLen caps each dead-letter stream at about this many
	// entries (XADD MAXLEN ~; Redis trims whole stream nodes, so a stream
	// may hold up to about 100 entries more): the stream is a recent tail,
	// and Spec.OnDeadLetter the place that keeps every dead letter. -1 leaves
	// the streams unbounded. Defaults to 10000.
	DeadLetterMaxLen int64 `yaml:"dead_letter_max_len"`
	// HandlerTimeout is the deadline of one handler call, and of the
	// dead-letter callbacks (Spec.OnDeadLetter) that settle one read. It must
	// be under half of ReclaimMinIdle, so neither a handler still running nor
	// the dead-lettering after it is reclaimed. Defaults to 40% of
	// ReclaimMinIdle.
	HandlerTimeout time.Duration `yaml:"-"`
	// MaxBlockingConns caps the XREADGROUP BLOCK calls in flight across all
	// pools of a Registry; keep it under the client's BlockingPoolSize. A
	// consumer that finds no free slot reads without BLOCK and sleeps instead.
	// Defaults to 64.
	MaxBlockingConns int `yaml:"max_blocking_conns"`
	// LeaseTTL is how long a consumer-name lease lives without a heartbeat; a
	// crashed process's names become free after it. Heartbeats run every
	// LeaseTTL/3; after a renewal a consumer relies on its lease for four
	// fifths of LeaseTTL, counted from when the renewal was sent, and past
	// that neither reads nor acknowledges until the next renewal. Defaults
	// to 15s.
	LeaseTTL time.Duration `yaml:"-"`
	// Clock tells the time. Defaults to the wall clock.
	Clock Clock `yaml:"-"`
	// Logger receives the runtime's logs. Defaults to slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// Hooks report activity for metrics. Defaults to none.
	Hooks Hooks `yaml:"-"`
}

// DefaultConfig returns the configuration with every default filled in.
func DefaultConfig() Config {
	return Config{TrimAcked: DefaultTrimAcked, BatchWait: DefaultBatchWait}.withDefaults()
}

func (c Config) withDefaults() Config {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.ReadMode == "" {
		c.ReadMode = DefaultReadMode
	}
	if c.Block == 0 {
		c.Block = DefaultBlock
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MinConsumers == 0 {
		c.MinConsumers = DefaultMinConsumers
	}
	if c.MaxConsumers == 0 {
		c.MaxConsumers = max(DefaultMaxConsumers, c.MinConsumers)
	}
	if c.ConsecutiveActiveTrigger == 0 {
		c.ConsecutiveActiveTrigger = DefaultConsecutiveActiveTrigger
	}
	if c.ConsecutiveIdleTrigger == 0 {
		c.ConsecutiveIdleTrigger = DefaultConsecutiveIdleTrigger
	}
	if c.StartConsumerMinInterval == 0 {
		c.StartConsumerMinInterval = DefaultStartConsumerMinInterval
	}
	if c.StopConsumerMinInterval == 0 {
		c.StopConsumerMinInterval = DefaultStopConsumerMinInterval
	}
	if c.ReclaimMinIdle == 0 {
		c.ReclaimMinIdle = DefaultReclaimMinIdle
	}
	if c.ReclaimInterval == 0 {
		c.ReclaimInterval = c.ReclaimMinIdle / 6
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = DefaultMaxDeliveries
	}
	if c.DeadLetterMaxLen == 0 {
		c.DeadLetterMaxLen = DefaultDeadLetterMaxLen
	}
	if c.HandlerTimeout == 0 {
		c.HandlerTimeout = c.ReclaimMinIdle * 2 / 5
	}
	if c.MaxBlockingConns == 0 {
		c.MaxBlockingConns = DefaultMaxBlockingConns
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.BatchSize < 1:
		return fmt.Errorf("stream: BatchSize must be at least 1, got %d", c.BatchSize)
	case c.BatchWait < 0:
		return fmt.Errorf("stream: BatchWait must not be negative, got %s", c.BatchWait)
	case c.ReadMode != ReadBlock && c.ReadMode != ReadPoll:
		return fmt.Errorf("stream: ReadMode must be %q or %q, got %q", ReadBlock, ReadPoll, c.ReadMode)
	case c.Block < time.Millisecond:
		return fmt.Errorf("stream: Block must be at least 1ms, got %s", c.Block)
	case c.PollInterval < time.Millisecond:
		return fmt.Errorf("stream: PollInterval must be at least 1ms, got %s", c.PollInterval)
	case c.MinConsumers < 1:
		return fmt.Errorf("stream: MinConsumers must be at least 1, got %d", c.MinConsumers)
	case c.MaxConsumers < c.MinConsumers:
		return fmt.Errorf("stream: MaxConsumers (%d) must be at least MinConsumers (%d)", c.MaxConsumers, c.MinConsumers)
	case c.ConsecutiveActiveTrigger < 1:
		return fmt.Errorf("stream: ConsecutiveActiveTrigger must be at least 1, got %d", c.ConsecutiveActiveTrigger)
	case c.ConsecutiveIdleTrigger < 1:
		return fmt.Errorf("stream: ConsecutiveIdleTrigger must be at least 1, got %d", c.ConsecutiveIdleTrigger)
	case c.StartConsumerMinInterval < 0:
		return fmt.Errorf("stream: StartConsumerMinInterval must not be negative, got %s", c.StartConsumerMinInterval)
	case c.StopConsumerMinInterval < 0:
		return fmt.Errorf("stream: StopConsumerMinInterval must not be negative, got %s", c.StopConsumerMinInterval)
	case c.ReclaimMinIdle < time.Millisecond:
		return fmt.Errorf("stream: ReclaimMinIdle must be at least 1ms, got %s", c.ReclaimMinIdle)
	case c.ReclaimInterval < time.Millisecond:
		return fmt.Errorf("stream: ReclaimInterval must be at least 1ms, got %s", c.ReclaimInterval)
	case c.MaxDeliveries < 1:
		return fmt.Errorf("stream: MaxDeliveries must be at least 1, got %d", c.MaxDeliveries)
	case c.DeadLetterMaxLen < -1:
		return fmt.Errorf("stream: DeadLetterMaxLen must be positive, or -1 for no bound, got %d", c.DeadLetterMaxLen)
	case c.HandlerTimeout <= 0 || c.HandlerTimeout >= c.ReclaimMinIdle/2:
		return fmt.Errorf("stream: HandlerTimeout must be positive and under half of ReclaimMinIdle (%s), got %s", c.ReclaimMinIdle, c.HandlerTimeout)
	case c.BatchWait+2*c.HandlerTimeout >= c.ReclaimMinIdle:
		return fmt.Errorf("stream: BatchWait plus twice HandlerTimeout (%s) must be under ReclaimMinIdle (%s), got %s", 2*c.HandlerTimeout, c.ReclaimMinIdle, c.BatchWait)
	case c.MaxBlockingConns < 1:
		return fmt.Errorf("stream: MaxBlockingConns must be at least 1, got %d", c.MaxBlockingConns)
	case c.LeaseTTL < 3*time.Millisecond:
		return fmt.Errorf("stream: LeaseTTL must be at least 3ms, got %s", c.LeaseTTL)
	}
	return nil
}

// yamlConfig is Config as written in YAML: durations as whole milliseconds or
// seconds. Pointers tell a field that is absent from one that is zero.
type yamlConfig struct {
	BatchSize                *int      `yaml:"batch_size,omitempty"`
	BatchWaitMS              *int64    `yaml:"batch_wait_ms,omitempty"`
	TrimAcked                *bool     `yaml:"trim_acked,omitempty"`
	ReadMode                 *ReadMode `yaml:"read_mode,omitempty"`
	BlockMS                  *int64    `yaml:"block_ms,omitempty"`
	PollIntervalMS           *int64    `yaml:"poll_interval_ms,omitempty"`
	IdleTimeoutSeconds       *int64    `yaml:"idle_timeout_seconds,omitempty"`
	MinConsumers             *int      `yaml:"min_consumers_per_instance,omitempty"`
	MaxConsumers             *int      `yaml:"max_consumers_per_instance,omitempty"`
	ConsecutiveActiveTrigger *int      `yaml:"consecutive_active_trigger,omitempty"`
	ConsecutiveIdleTrigger   *int      `yaml:"consecutive_idle_trigger,omitempty"`
	StartConsumerMinMS       *int64    `yaml:"start_consumer_min_interval_ms,omitempty"`
	StopConsumerMinMS        *int64    `yaml:"stop_consumer_min_interval_ms,omitempty"`
	ReclaimMinIdleMS         *int64    `yaml:"reclaim_min_idle_ms,omitempty"`
	ReclaimIntervalMS        *int64    `yaml:"reclaim_interval_ms,omitempty"`
	MaxDeliveries            *int64    `yaml:"max_deliveries,omitempty"`
	DeadLetterMaxLen         *int64    `yaml:"dead_letter_max_len,omitempty"`
	HandlerTimeoutMS         *int64    `yaml:"handler_timeout_ms,omitempty"`
	MaxBlockingConns         *int      `yaml:"max_blocking_conns,omitempty"`
	LeaseTTLMS               *int64    `yaml:"lease_ttl_ms,omitempty"`
}

// yamlKeys returns the YAML names of yamlConfig's fields.
func yamlKeys() map[string]bool {
	t := reflect.TypeFor[yamlConfig]()
	keys := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		keys[name] = true
	}
	return keys
}

func setInt[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// setDur sets *dst to *src units, if set; a value whose duration would
// overflow is refused, naming key.
func setDur(errs *[]error, key string, dst *time.Duration, src *int64, unit time.Duration) {
	if src == nil {
		return
	}
	if *src > math.MaxInt64/int64(unit) || *src < math.MinInt64/int64(unit) {
		*errs = append(*errs, fmt.Errorf("stream config: %s is out of range, got %d", key, *src))
		return
	}
	*dst = time.Duration(*src) * unit
}

// UnmarshalYAML reads the `stream:` section. Fields absent from the YAML keep
// the value c already has, so decode into DefaultConfig() to get defaults.
func (c *Config) UnmarshalYAML(node *yaml.Node) error {
	// node.Decode does not inherit the decoder's KnownFields, so unknown
	// keys are rejected here: a misspelt tunable must not pass silently.
	if node.Kind == yaml.MappingNode {
		known := yamlKeys()
		for i := 0; i+1 < len(node.Content); i += 2 {
			if k := node.Content[i].Value; !known[k] {
				return fmt.Errorf("stream config: line %d: unknown key %q", node.Content[i].Line, k)
			}
		}
	}
	var y yamlConfig
	if err := node.Decode(&y); err != nil {
		return fmt.Errorf("stream config: %w", err)
	}
	var errs []error
	setInt(&c.BatchSize, y.BatchSize)
	setDur(&errs, "batch_wait_ms", &c.BatchWait, y.BatchWaitMS, time.Millisecond)
	setInt(&c.TrimAcked, y.TrimAcked)
	setInt(&c.ReadMode, y.ReadMode)
	setDur(&errs, "block_ms", &c.Block, y.BlockMS, time.Millisecond)
	setDur(&errs, "poll_interval_ms", &c.PollInterval, y.PollIntervalMS, time.Millisecond)
	setDur(&errs, "idle_timeout_seconds", &c.IdleTimeout, y.IdleTimeoutSeconds, time.Second)
	setInt(&c.MinConsumers, y.MinConsumers)
	setInt(&c.MaxConsumers, y.MaxConsumers)
	setInt(&c.ConsecutiveActiveTrigger, y.ConsecutiveActiveTrigger)
	setInt(&c.ConsecutiveIdleTrigger, y.ConsecutiveIdleTrigger)
	setDur(&errs, "start_consumer_min_interval_ms", &c.StartConsumerMinInterval, y.StartConsumerMinMS, time.Millisecond)
	setDur(&errs, "stop_consumer_min_interval_ms", &c.StopConsumerMinInterval, y.StopConsumerMinMS, time.Millisecond)
	setDur(&errs, "reclaim_min_idle_ms", &c.ReclaimMinIdle, y.ReclaimMinIdleMS, time.Millisecond)
	setDur(&errs, "reclaim_interval_ms", &c.ReclaimInterval, y.ReclaimIntervalMS, time.Millisecond)
	setInt(&c.MaxDeliveries, y.MaxDeliveries)
	setInt(&c.DeadLetterMaxLen, y.DeadLetterMaxLen)
	setDur(&errs, "handler_timeout_ms", &c.HandlerTimeout, y.HandlerTimeoutMS, time.Millisecond)
	setInt(&c.MaxBlockingConns, y.MaxBlockingConns)
	setDur(&errs, "lease_ttl_ms", &c.LeaseTTL, y.LeaseTTLMS, time.Millisecond)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if y.ReclaimMinIdleMS != nil && y.HandlerTimeoutMS == nil {
		// The handler deadline follows the reclaim threshold unless set.
		c.HandlerTimeout = 0
	}
	if y.ReclaimMinIdleMS != nil && y.ReclaimIntervalMS == nil {
		c.ReclaimInterval = 0
	}
	return nil
}

// MarshalYAML writes the configuration with the YAML names and units.
func (c Config) MarshalYAML() (any, error) {
	ms := func(d time.Duration) *int64 { v := d.Milliseconds(); return &v }
	secs := int64(c.IdleTimeout / time.Second)
	return yamlConfig{
		BatchSize: &c.BatchSize, BatchWaitMS: ms(c.BatchWait), TrimAcked: &c.TrimAcked, ReadMode: &c.ReadMode,
		BlockMS: ms(c.Block), PollIntervalMS: ms(c.PollInterval), IdleTimeoutSeconds: &secs,
		MinConsumers: &c.MinConsumers, MaxConsumers: &c.MaxConsumers,
		ConsecutiveActiveTrigger: &c.ConsecutiveActiveTrigger, ConsecutiveIdleTrigger: &c.ConsecutiveIdleTrigger,
		StartConsumerMinMS: ms(c.StartConsumerMinInterval), StopConsumerMinMS: ms(c.StopConsumerMinInterval),
		ReclaimMinIdleMS: ms(c.ReclaimMinIdle), ReclaimIntervalMS: ms(c.ReclaimInterval),
		MaxDeliveries: &c.MaxDeliveries, DeadLetterMaxLen: &c.DeadLetterMaxLen, HandlerTimeoutMS: ms(c.HandlerTimeout),
		MaxBlockingConns: &c.MaxBlockingConns, LeaseTTLMS: ms(c.LeaseTTL),
	}, nil
}
