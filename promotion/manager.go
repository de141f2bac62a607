package promotion

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/hint"
	"github.com/dibsio/dibs/internal/startstop"
	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/store"
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
	// DefaultQuietRecheckInterval is how often the Manager re-checks a quiet
	// promotion (see Config.QuietRecheckInterval).
	DefaultQuietRecheckInterval = time.Minute
	// DefaultRetention is how long a drained promotion keeps its Redis
	// state before it is retired (see Config.Retention).
	DefaultRetention = 7 * 24 * time.Hour
)

// Config configures a Manager.
type Config struct {
	// Prefix is the Redis key prefix. Defaults to DefaultPrefix.
	Prefix string
	// ClassicClaims makes the promotions whose Redis state this manager
	// creates keep the classic layout (claim.LayoutClassic) instead of the
	// compact one: for rolling upgrades while instances of an earlier
	// release, which refuse compact promotions, still run.
	ClassicClaims bool
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
	// QuietRecheckInterval is how often a quiet promotion is re-checked
	// instead: one that takes no claims until its end (sold out, nothing
	// voided back), whose stream had no backlog at its last re-check, whose
	// pool does not run on this instance and whose claims answered here are
	// all confirmed. A claim or grant on this instance, and a hint from
	// another one, make it ordinary again at once; a lost hint is caught
	// within this interval. Defaults to DefaultQuietRecheckInterval; it is
	// never shorter than RecheckInterval.
	QuietRecheckInterval time.Duration
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
	// JournalSize is the most claims per promotion this instance remembers
	// having answered and not yet seen confirmed, to put them back if Redis
	// loses them (see journal.go); past it the oldest are dropped and
	// counted. Defaults to DefaultJournalSize.
	JournalSize int
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
	if c.QuietRecheckInterval == 0 {
		c.QuietRecheckInterval = DefaultQuietRecheckInterval
	}
	if c.QuietRecheckInterval > 0 {
		c.QuietRecheckInterval = max(c.QuietRecheckInterval, c.RecheckInterval)
	}
	if c.JournalSize == 0 {
		c.JournalSize = DefaultJournalSize
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
	if c.QuietRecheckInterval < 0 {
		return fmt.Errorf("promotion: Config.QuietRecheckInterval must not be negative, got %s", c.QuietRecheckInterval)
	}
	if c.OpenWait < 0 {
		return fmt.Errorf("promotion: Config.OpenWait must not be negative, got %s", c.OpenWait)
	}
	if c.JournalSize < 0 {
		return fmt.Errorf("promotion: Config.JournalSize must not be negative, got %d", c.JournalSize)
	}
	if c.Retention < 0 {
		return fmt.Errorf("promotion: Config.Retention must not be negative, got %s", c.Retention)
	}
	return nil
}

// Manager runs promotions. Create it with New, then Start it.
//
// Three kinds of goroutine run inside it (see docs/architecture.md):
//
//   - the loop (loop.go) owns the set of undrained promotions and their
//     pool specs: it re-checks them every RecheckInterval, opens those
//     Redis does not know, drains ended ones and starts rebuilds. Other
//     goroutines ask it over m.asks and read what it publishes in m.known;
//   - the waker starts or wakes the confirmation pools that claims and
//     hints queued on m.wakes, so a claim never waits for a pool, and tells
//     the other instances when it started one for new claims;
//   - the hint bus (internal/hint) listens for the other instances' hints
//     on each undrained promotion's channel and queues a wake for each;
//   - the rebuilder's goroutines, one per promotion being rebuilt.
//
// The issuers run in the stream pools' goroutines.
type Manager struct {
	client rueidis.Client
	st     store.Store
	gate   *claim.Gate
	reg    *stream.Registry
	hints  *hint.Bus // nil with Config.DisableHints
	cfg    Config
	log    *slog.Logger

	// known is the loop's published set of undrained promotions, by id: a
	// map the loop never changes once published (it publishes a new one).
	// Written by the loop (and New); read by anyone, lock-free.
	known atomic.Pointer[map[string]*handle]
	// asks carries requests to the loop; bounded, senders never block.
	asks chan ask
	// wakes carries pools to start or wake to the waker; bounded, senders
	// never block (a handle is in it at most once, see handle.queued).
	wakes chan *handle

	// Loop-owned state: written and read by the loop goroutine only (and by
	// Start's first re-check, before the loop starts).
	active  map[string]Promotion // undrained promotions' definitions
	handles map[string]*handle   // what known publishes
	opened  map[string]time.Time // when an open of the id last succeeded
	missing map[string]time.Time // when a lookup of the id last found none
	gone    map[string]bool      // retired promotions seen (bounded by maxRemembered)

	// running is true while the loop runs (from its first re-check to
	// Stop); written by the loop's goroutine and Stop, read by anyone.
	running atomic.Bool

	life startstop.Base // runs the loop, which runs the waker beside it

	// afterRecheck, if set, is called by the loop after each periodic
	// re-check; set by tests.
	afterRecheck atomic.Pointer[func()]

	rb     rebuilder // background rebuilds after Redis lost writes (rebuild.go)
	fences fences    // highest ranks known to be taken (fence.go)
	jr     journals  // claims answered and not yet seen confirmed (journal.go)

	// rates measures one consumer's confirmation rate (sizing.go); written
	// by the issuers, read by the loop.
	rates rateMeter
	// Loop-owned, for sizing (sizing.go): the live instance count last
	// read (0 before any) and when.
	instances int
	lastCount time.Time
	// announced is set by the loop once it announced this instance in
	// the presence set; read by Stop.
	announced atomic.Bool
	// Loop-owned, for retirement (retire.go): when the last retirement
	// pass began (zero before the first).
	lastRetire time.Time
	// sold is the sold-out memory (soldout.go), owned by its own goroutine.
	sold *soldMemory
}

// New returns a Manager over a Redis client and a store.
func New(client rueidis.Client, st store.Store, cfg Config) (*Manager, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	layout := claim.LayoutCompact
	if cfg.ClassicClaims {
		layout = claim.LayoutClassic
	}
	gate, err := claim.New(client, claim.Config{Prefix: cfg.Prefix, Layout: layout})
	if err != nil {
		return nil, fmt.Errorf("promotion manager: %w", err)
	}
	reg, err := stream.NewRegistry(client, cfg.Instance, cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("promotion manager: %w", err)
	}
	m := &Manager{
		client:  client,
		st:      st,
		gate:    gate,
		reg:     reg,
		cfg:     cfg,
		log:     cfg.Logger,
		asks:    make(chan ask, askBacklog),
		wakes:   make(chan *handle, wakeBacklog),
		active:  make(map[string]Promotion),
		handles: make(map[string]*handle),
		opened:  make(map[string]time.Time),
		missing: make(map[string]time.Time),
		gone:    make(map[string]bool),
		jr:      newJournals(cfg.JournalSize),
		sold:    newSoldMemory(cfg.SoldOutMemory),
	}
	m.known.Store(&map[string]*handle{})
	if !cfg.DisableHints {
		m.hints, err = hint.New(client, hint.Config{
			Channel: func(id string) string { return gate.Keys(id).Hints() },
			OnHint: func(h hint.Hint) {
				m.memoryHint(h)
				m.hinted(h)
			},
			Logger: cfg.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("promotion manager: %w", err)
		}
	}
	return m, nil
}

// Gate returns the claim gate the manager uses.
func (m *Manager) Gate() *claim.Gate { return m.gate }

// Registry returns the stream registry that runs the confirmation pools.
func (m *Manager) Registry() *stream.Registry { return m.reg }

// Start resumes every undrained promotion (its first re-check, on the
// caller's context) and starts the loop, the waker and the hint bus. A second Start fails
// with ErrStarted, and a Start after Stop with ErrStopped; a Manager whose
// first re-check failed is done too.
func (m *Manager) Start(ctx context.Context) error {
	first := make(chan error, 1)
	err := m.life.Start(func(stopping <-chan struct{}) {
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Go(func() {
			select {
			case <-stopping:
				cancel()
			case <-runCtx.Done():
			}
		})
		if m.hints != nil {
			if err := m.hints.Start(); err != nil {
				first <- err
				return
			}
			defer func() { _ = m.hints.Stop(context.Background()) }()
		}
		if err := m.recheck(ctx, true); err != nil {
			first <- err
			return
		}
		m.running.Store(true)
		first <- nil
		wg.Go(func() { m.runWaker(runCtx) })
		if m.sold.ttl > 0 {
			wg.Go(func() { m.runSoldMemory(runCtx) })
		}
		m.loop(runCtx)
	})
	if err != nil {
		return err
	}
	if err := <-first; err != nil {
		return fmt.Errorf("resume promotions: %w", err)
	}
	return nil
}

// Stop stops the loop, the waker, the rebuilds and every pool; in-flight
// batches finish until ctx's deadline and anything unfinished stays pending
// in Redis for the next start. Safe to call twice or before Start.
func (m *Manager) Stop(ctx context.Context) error {
	m.running.Store(false)
	err := m.life.Stop(ctx)
	m.rb.stop()
	err = errors.Join(err, m.reg.Stop(ctx))
	if m.announced.Load() {
		// Best effort: the announcement expires anyway.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hintTimeout)
		_ = m.reg.Leave(lctx, m.presenceKey())
		cancel()
	}
	return err
}

// recheck loads the undrained promotions, makes sure each has its Redis
// state, starts the pool of each one with work, and marks ended promotions
// with no work left drained. On the first pass every undrained promotion's
// pool is started, so entries left pending by a killed process are resumed.
// A quiet promotion (see Config.QuietRecheckInterval) is left out until its
// next quiet re-check is due, so an instance whose promotions are all quiet
// sends Redis nothing in between.
func (m *Manager) recheck(ctx context.Context, first bool) error {
	stored, err := m.st.ListUndrained(ctx)
	if err != nil {
		return err
	}
	list := make([]Promotion, len(stored))
	fresh := make(map[string]Promotion, len(list))
	for i, sp := range stored {
		list[i] = fromStore(sp)
		fresh[sp.ID] = list[i]
	}
	prev := m.active
	m.active = fresh
	m.track(list, true)
	m.resize(ctx, list, first)

	now := m.cfg.Now()
	var errs []error
	// Redis is fast, the database is the truth: a promotion whose counters
	// fell behind the database is paused and rebuilt before anything else.
	// Promotions seen for the first time are opened on the way.
	refresh := make(map[string]bool)
	for _, p := range list {
		if _, known := prev[p.ID]; first || !known {
			refresh[p.ID] = true
		}
	}
	list = m.due(list, refresh, now)
	m.withCodes(ctx, list)
	marks, err := m.checkFloors(ctx, list, refresh)
	if err != nil {
		errs = append(errs, err)
	}
	if err := m.repair(ctx, list, marks); err != nil {
		errs = append(errs, err)
	}
	// One pipelined round trip reads every promotion's backlog.
	works, werrs := m.groupWorks(ctx, list)
	segBusy, err := m.segmentWork(ctx, list, first)
	if err != nil {
		errs = append(errs, err)
	}
	for i, p := range list {
		work, err := works[i], werrs[i]
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if m.cfg.OnBacklog != nil {
			m.cfg.OnBacklog(p.ID, work.pending+max(work.lag, 0))
		}
		if work.busy() || first {
			if _, err := m.startOrWakePool(ctx, m.handles[p.ID]); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		running := m.reg.Running(p.ID) || segBusy[p.ID]
		if p.ended(now) && !running {
			if err := m.maybeDrain(ctx, p); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if h := m.handles[p.ID]; h != nil && marks != nil && !running && m.journalEmpty(p.ID) && quiet(p, marks[i], now) {
			// Unless a claim or a hint came since due cleared the mark.
			h.quietUntil.CompareAndSwap(0, now.Add(m.cfg.QuietRecheckInterval).UnixNano())
		}
	}
	return errors.Join(errs...)
}

// due returns the promotions of list this re-check looks at: all but the
// quiet ones whose next quiet re-check is not due yet. It clears the quiet
// mark of those it returns; the re-check sets it again if they are still
// quiet. Loop only.
func (m *Manager) due(list []Promotion, refresh map[string]bool, now time.Time) []Promotion {
	out := list[:0:0]
	for _, p := range list {
		h := m.handles[p.ID]
		if h != nil && !refresh[p.ID] {
			// Half a tick early rather than a whole tick late.
			if until := h.quietUntil.Load(); until > 0 && now.Add(m.cfg.RecheckInterval/2).UnixNano() < until {
				continue
			}
			h.quietUntil.Store(0)
		}
		out = append(out, p)
	}
	return out
}

// journalEmpty reports whether every claim of promotion id this instance
// answered was seen confirmed. Loop only.
func (m *Manager) journalEmpty(id string) bool {
	j := m.jr.byID[id]
	return j == nil || len(j.es) == 0
}

// quiet reports whether p, with marks mk, takes no claims until its end:
// a first-come promotion whose stock is all taken, that is not closed,
// paused or halted (those are watched every re-check), and whose window
// is still open (an ended one is drained by the re-check).
func quiet(p Promotion, mk claim.Mark, now time.Time) bool {
	return p.Mode == ModeFirstCome && !p.segmented() && mk.SoldOut() && !mk.Paused && mk.Halted == "" &&
		!mk.Closed && !p.ended(now)
}

// groupState is the consumer group's backlog.
type groupState struct {
	pending int64
	lag     int64 // -1 when Redis cannot tell
}

func (g groupState) busy() bool { return g.pending > 0 || g.lag != 0 }

// groupWorks reads the issuers group's pending count and lag of every
// promotion in list, in one pipelined round trip (rueidis sends each command
// to its promotion's Cluster node).
func (m *Manager) groupWorks(ctx context.Context, list []Promotion) ([]groupState, []error) {
	works := make([]groupState, len(list))
	errs := make([]error, len(list))
	if len(list) == 0 {
		return works, errs
	}
	cmds := make(rueidis.Commands, len(list))
	for i, p := range list {
		cmds[i] = m.client.B().XinfoGroups().Key(m.gate.Keys(p.ID).Stream()).Build()
	}
	for i, res := range m.client.DoMulti(ctx, cmds...) {
		works[i], errs[i] = parseGroupWork(list[i].ID, res)
	}
	return works, errs
}

// parseGroupWork reads the issuers group out of an XINFO GROUPS reply.
func parseGroupWork(id string, res rueidis.RedisResult) (groupState, error) {
	groups, err := res.ToArray()
	if err != nil {
		return groupState{}, fmt.Errorf("group state of %s: %w", id, err)
	}
	for _, g := range groups {
		fields, err := g.AsMap()
		if err != nil {
			continue
		}
		nameMsg := fields["name"]
		if name, _ := nameMsg.ToString(); name != claim.Group {
			continue
		}
		st := groupState{lag: -1}
		if v, ok := fields["pending"]; ok {
			st.pending, _ = v.AsInt64()
		}
		if v, ok := fields["lag"]; ok && !v.IsNil() {
			if n, err := v.AsInt64(); err == nil {
				st.lag = n
			}
		}
		return st, nil
	}
	return groupState{}, fmt.Errorf("group state of %s: no %s group", id, claim.Group)
}

// maybeDrain marks an ended promotion drained when the database accounts
// for every accepted claim. Whether it ended is decided by Redis, against
// Redis TIME — the clock the claim script's window uses — never by this
// instance's clock: the same step closes it in Redis, so no claim is
// accepted after it is found ended, and the rank counter it reads is final.
func (m *Manager) maybeDrain(ctx context.Context, p Promotion) error {
	isEnded, seq, err := m.ended(ctx, p)
	if errors.Is(err, claim.ErrNotFound) {
		return nil // the next re-check opens it again
	}
	if err != nil || !isEnded {
		return err
	}
	c, err := m.st.Counts(ctx, p.ID)
	if err != nil {
		return err
	}
	if c.Issued+c.Failed+c.Voided < seq {
		return nil
	}
	if err := m.st.MarkDrained(ctx, p.ID, m.cfg.Now()); err != nil {
		return err
	}
	// A replay may have moved claims back into the pipeline, and a re-rank
	// may have taken a rank, since the counts were read: read both again,
	// and undo the drain if the database falls short (a replay that moves
	// its claims later undoes it itself).
	// A change may have moved the end later meanwhile (see Patch): a
	// promotion no longer ended is not drained either.
	ended2, seq2, err := m.ended(ctx, p)
	if err == nil {
		c, err = m.st.Counts(ctx, p.ID)
	}
	if err != nil || !ended2 || seq2 != seq || c.Issued+c.Failed+c.Voided < seq2 {
		if uerr := m.st.SetDrained(ctx, p.ID, false); uerr != nil {
			return errors.Join(err, uerr)
		}
		return err
	}
	delete(m.active, p.ID)
	m.untrack(p.ID)
	m.fences.forget(p.ID)
	if m.cfg.OnDrained != nil {
		m.cfg.OnDrained(p.ID)
	}
	m.log.Info("promotion drained", "promotion", p.ID, "issued", c.Issued, "failed", c.Failed)
	return nil
}

func (m *Manager) acker(id string) func(context.Context, []stream.Message) error {
	return func(ctx context.Context, msgs []stream.Message) error {
		entries := make([]claim.Entry, len(msgs))
		for i, msg := range msgs {
			entries[i] = claim.Entry{ID: msg.ID, Rank: msg.Fields["rank"]}
		}
		_, err := m.gate.Ack(ctx, id, entries)
		return err
	}
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
