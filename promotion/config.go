package promotion

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/stream"
	"github.com/dibsio/dibs/waitroom"
)

// Defaults of Config.
const (
	// DefaultRecheckInterval is how often the Manager re-checks promotions.
	DefaultRecheckInterval = time.Second
	// DefaultOpenWait is how long a request waits for the Manager's loop to
	// open a promotion Redis does not know before it answers ErrNotReady.
	DefaultOpenWait = time.Second
	// DefaultIdleRecheckInterval is how often the Manager re-checks an idle
	// promotion in full (see Config.IdleRecheckInterval).
	DefaultIdleRecheckInterval = 10 * time.Minute
	// DefaultRetention is how long a drained promotion keeps its Redis
	// state before it is retired (see Config.Retention).
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultJournalBytes is the default of Config.JournalBytes: 64 MiB,
	// about 1.1 million claims of 36-byte user ids without
	// Idempotency-Keys (24 bytes a claim plus its user id and key): 50,000
	// claims a second for 20 s of a database that confirms nothing.
	DefaultJournalBytes = 64 << 20
	// DefaultSoldOutMemory is how long an instance answers claims from
	// what it learnt of a sold-out or ended promotion (see
	// Config.SoldOutMemory).
	DefaultSoldOutMemory = time.Second
)

// hintTimeout bounds one SPUBLISH of a hint to the other instances: a hint
// is worth little late, and whoever sends it must get on with its work.
const hintTimeout = time.Second

// Config configures a Manager.
type Config struct {
	// Prefix is the Redis key prefix. Defaults to DefaultPrefix.
	Prefix string
	// ClassicClaims makes the promotions whose Redis state this manager
	// creates keep the classic layout (claim.LayoutClassic) instead of the
	// compact one: for rolling upgrades while instances of an earlier
	// release, which refuse compact promotions, still run.
	ClassicClaims bool
	// UnbatchedClaims turns the batching of claims off: each claim of a
	// promotion without a waiting room then runs the claim script in a call
	// of its own, instead of joining the claims of its promotion that queue
	// up while a call is in flight (claim.Batcher, one claim_batch call for
	// all of them). Defaults to false: claims batched.
	UnbatchedClaims bool
	// Instance names this process's consumers; unique per live process.
	// Defaults to a random id.
	Instance string
	// Stream configures the confirmation pools. Left zero, it defaults to
	// stream.DefaultConfig().
	Stream stream.Config
	// RecheckInterval is how often promotions are re-checked for work, for
	// lost Redis writes and for being drained. Defaults to
	// DefaultRecheckInterval.
	RecheckInterval time.Duration
	// IdleRecheckInterval is how often an idle promotion is re-checked in
	// full: one whose stream had no backlog at its last re-check, whose
	// pool does not run on this instance, whose claims answered here are
	// all confirmed, that Redis holds neither rebuilding nor halted, and that has
	// no segments. In between it costs no Redis command of its own: the
	// instance's loss probe (one command per Redis master every few
	// re-checks) watches for Redis losing writes, and each re-check
	// compares the database's highest rank with the confirmed rank Redis
	// showed (no Redis command). A claim or grant on this instance, and a
	// hint from another one, make it ordinary again at once; a backlog
	// whose hint was lost (work left by an instance that died, say) is
	// found within this interval; an ended one is looked at when it ends.
	// Defaults to DefaultIdleRecheckInterval; it is never shorter than
	// RecheckInterval.
	IdleRecheckInterval time.Duration
	// DisableHints turns the wake-ups between instances off: an instance
	// then neither tells the others (SPUBLISH) that it started a pool for
	// new claims, nor listens (SSUBSCRIBE); their pools start at their next
	// re-check instead. Defaults to false: hints on.
	DisableHints bool
	// OpenWait bounds how long a claim, grant or read waits for the
	// Manager's loop to open a promotion Redis does not know (one created
	// on another instance a moment ago, or one Redis lost); past it the
	// request gets ErrNotReady. Defaults to DefaultOpenWait.
	OpenWait time.Duration
	// Logger receives the manager's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// OnIssued, if set, is called with the number of rows newly issued.
	OnIssued func(promotionID string, n int)
	// OnDeadLetter, if set, is called for every dead-lettered claim.
	OnDeadLetter func(promotionID string)
	// OnBacklog, if set, is called on every re-check with the number of the
	// promotion's claims not yet confirmed (pending plus undelivered).
	OnBacklog func(promotionID string, backlog int64)
	// OnRebuild, if set, is called after every background rebuild of a
	// promotion whose Redis state lost writes (see Manager.Rebuild), failed
	// ones included: their report's Err is set.
	OnRebuild func(RebuildReport)
	// OnHalted, if set, is called on every re-check of a promotion Redis
	// holds with whether it is halted for an operator: its database lost
	// claims Redis saw confirmed into it (see Manager.Rebuild).
	OnHalted func(promotionID string, halted bool)
	// OnDrained, if set, is called once a promotion is marked drained: the
	// Manager stops watching it, so per-promotion series can be dropped.
	OnDrained func(promotionID string)
	// Rooms holds the waiting rooms (package waitroom), with the same
	// Prefix: a promotion created with its waiting room enabled gets its
	// room opened next to its claim state, and its claims need a pass.
	// Without it, creating such a promotion is refused; claims on one
	// created by another instance are refused not_admitted.
	Rooms *waitroom.Rooms
	// JournalBytes is the memory, in bytes, of the journals of the claims
	// this instance answered and has not yet seen confirmed, kept to put
	// them back if Redis loses them (see journal.go): 24 bytes a claim
	// plus its user id and Idempotency-Key. With it spent, further claims
	// are not journaled and are counted (OnJournalDropped). Defaults to
	// DefaultJournalBytes (64 MiB: 50,000 claims/s of 36-byte user ids for
	// 20 s of a database that confirms nothing).
	JournalBytes int64
	// OnJournal, if set, is called once per re-check interval with the
	// claims the journals hold and the bytes they take.
	OnJournal func(claims int, bytes int64)
	// OnRequeued, if set, is called with the number of claims this instance
	// answered, Redis lost, and the journal put back.
	OnRequeued func(promotionID string, n int)
	// OnJournalDropped, if set, is called with the number of claims the
	// journal dropped (full): they could not be put back if Redis lost them.
	OnJournalDropped func(promotionID string, n int)
	// Issuers says what each kind of promotion issues (package issue): a
	// claim gets its kind's Grant in the transaction that writes its issued
	// row. Kinds missing from it get the built-in issuer of
	// issue.Builtin(issue.Config{}). Defaults to those.
	Issuers issue.Kinds
	// Retention is how long a promotion keeps its Redis state after it
	// drained (ended, every claim confirmed or dead-lettered): then it is
	// retired — marked in the database, and its Redis keys, stream and
	// dead-letter stream deleted. The database keeps everything and answers
	// for a retired promotion from then on; claims on it get ErrEnded.
	// Idempotency records live as long as the keys: at least Retention
	// past the promotion's end. Defaults to DefaultRetention.
	Retention time.Duration
	// SoldOutMemory is how long an instance answers claims of a promotion
	// from memory after a claim of it was answered sold out or ended, here
	// or (told by a hint) on another instance, instead of asking Redis
	// again (see soldout.go and docs/contract.md): at most this long, and
	// until a hint tells the promotion changed — a change, a unit put back
	// in stock. Claims with an Idempotency-Key always reach Redis. Negative
	// turns the memory off. Defaults to DefaultSoldOutMemory.
	SoldOutMemory time.Duration
	// OnMemoryAnswer, if set, is called for every claim answered from the
	// sold-out memory, with the code answered ("sold_out" or "ended").
	OnMemoryAnswer func(promotionID, code string)
	// OnRemaining, if set, is called with the stock a claim of a promotion
	// without segments left, as its answer tells it: after every accepted
	// claim (not a replay), and with 0 after every claim answered sold out
	// (from Redis or from memory). It is called on the claim path and must
	// be fast.
	OnRemaining func(promotionID string, remaining int64)
	// OnHandling, if set, is called by the issuer with what one consumer of
	// a promotion's confirmation pool holds (see Handling): when it takes a
	// batch and when it is done with it. consumer names the consumer among
	// every pool of the promotion on this instance (its segments' too). It
	// is called from the pools' goroutines and must be fast.
	OnHandling func(promotionID, consumer string, h Handling)
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// withDefaults fills in the zero values.
func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Instance == "" {
		c.Instance = randomID(6)
	}
	if reflect.ValueOf(c.Stream).IsZero() {
		c.Stream = stream.DefaultConfig()
	}
	if c.RecheckInterval == 0 {
		c.RecheckInterval = DefaultRecheckInterval
	}
	if c.OpenWait == 0 {
		c.OpenWait = DefaultOpenWait
	}
	if c.IdleRecheckInterval == 0 {
		c.IdleRecheckInterval = DefaultIdleRecheckInterval
	}
	if c.IdleRecheckInterval > 0 {
		c.IdleRecheckInterval = max(c.IdleRecheckInterval, c.RecheckInterval)
	}
	if c.JournalBytes == 0 {
		c.JournalBytes = DefaultJournalBytes
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.SoldOutMemory == 0 {
		c.SoldOutMemory = DefaultSoldOutMemory
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	builtin, err := issue.Builtin(issue.Config{})
	if err != nil {
		panic(err) // the default configuration is valid
	}
	kinds := make(issue.Kinds, len(builtin))
	for k, iss := range builtin {
		kinds[k] = iss
	}
	for k, iss := range c.Issuers {
		if iss != nil {
			kinds[k] = iss
		}
	}
	c.Issuers = kinds
	return c
}

// validate names the first field that cannot work (the stream
// configuration is checked by the stream registry).
func (c Config) validate() error {
	if c.RecheckInterval < 0 {
		return fmt.Errorf("promotion: Config.RecheckInterval must not be negative, got %s", c.RecheckInterval)
	}
	if c.IdleRecheckInterval < 0 {
		return fmt.Errorf("promotion: Config.IdleRecheckInterval must not be negative, got %s", c.IdleRecheckInterval)
	}
	if c.OpenWait < 0 {
		return fmt.Errorf("promotion: Config.OpenWait must not be negative, got %s", c.OpenWait)
	}
	if c.JournalBytes < 0 {
		return fmt.Errorf("promotion: Config.JournalBytes must not be negative, got %d", c.JournalBytes)
	}
	if c.Retention < 0 {
		return fmt.Errorf("promotion: Config.Retention must not be negative, got %s", c.Retention)
	}
	return nil
}

// randomID is n random bytes in hex.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
