package promotion

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// DefaultRecheckInterval is how often the Manager re-checks promotions.
const DefaultRecheckInterval = time.Second

// Config configures a Manager.
type Config struct {
	// Prefix is the Redis key prefix. Defaults to claim.DefaultPrefix.
	Prefix string
	// Instance names this process's consumers; unique per live process.
	// Defaults to a random id.
	Instance string
	// Stream configures the confirmation pools. Defaults to stream.DefaultConfig().
	Stream *stream.Config
	// RecheckInterval is how often promotions are re-checked for work and
	// for being drained. Defaults to DefaultRecheckInterval.
	RecheckInterval time.Duration
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
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Manager runs promotions. Create it with New, then Start it.
type Manager struct {
	client rueidis.Client
	st     store.Store
	gate   *claim.Gate
	reg    *stream.Registry
	cfg    Config
	log    *slog.Logger

	mu      sync.Mutex
	active  map[string]Promotion   // undrained promotions; guarded by mu
	specs   map[string]stream.Spec // pool specs by promotion; guarded by mu
	started bool                   // guarded by mu
	stopped bool                   // guarded by mu
	cancel  context.CancelFunc     // stops the re-check loop; guarded by mu
	wg      sync.WaitGroup
	rb      rebuilder // background rebuilds after Redis lost writes (rebuild.go)
	fences  fences    // highest ranks known to be taken (fence.go)
}

// New returns a Manager over a Redis client and a store.
func New(client rueidis.Client, st store.Store, cfg Config) (*Manager, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = claim.DefaultPrefix
	}
	if cfg.Instance == "" {
		cfg.Instance = randomID(6)
	}
	if cfg.Stream == nil {
		sc := stream.DefaultConfig()
		cfg.Stream = &sc
	}
	if cfg.RecheckInterval <= 0 {
		cfg.RecheckInterval = DefaultRecheckInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	reg, err := stream.NewRegistry(client, cfg.Instance, *cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("promotion manager: %w", err)
	}
	return &Manager{
		client: client,
		st:     st,
		gate:   claim.New(client, claim.Config{Prefix: cfg.Prefix}),
		reg:    reg,
		cfg:    cfg,
		log:    cfg.Logger,
		active: make(map[string]Promotion),
		specs:  make(map[string]stream.Spec),
	}, nil
}

// Gate returns the claim gate the manager uses.
func (m *Manager) Gate() *claim.Gate { return m.gate }

// Registry returns the stream registry that runs the confirmation pools.
func (m *Manager) Registry() *stream.Registry { return m.reg }

// Start resumes every undrained promotion and starts the re-check loop.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return nil
	}
	m.started = true
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	m.mu.Unlock()

	if err := m.recheck(ctx, true); err != nil {
		cancel()
		return fmt.Errorf("resume promotions: %w", err)
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.loop(loopCtx)
	}()
	return nil
}

// Stop stops the re-check loop and every pool; in-flight batches finish
// until ctx's deadline and anything unfinished stays pending in Redis for
// the next start. Safe to call twice or before Start.
func (m *Manager) Stop(ctx context.Context) error {
	m.mu.Lock()
	m.stopped = true
	cancel := m.cancel
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	m.wg.Wait()
	m.rb.stop()
	return m.reg.Shutdown(ctx)
}

func (m *Manager) loop(ctx context.Context) {
	t := time.NewTicker(m.cfg.RecheckInterval)
	defer t.Stop()
	var lastSweep time.Time // the first tick sweeps: a restart finishes what a crash left
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := m.recheck(ctx, false); err != nil && ctx.Err() == nil {
				m.log.Warn("re-check of promotions failed", "err", err)
			}
			if now := m.cfg.Now(); now.Sub(lastSweep) >= sweepEvery*m.cfg.RecheckInterval {
				lastSweep = now
				if err := m.sweep(ctx); err != nil && ctx.Err() == nil {
					m.log.Warn("dead-letter sweep failed", "err", err)
				}
			}
		}
	}
}

// recheck loads the undrained promotions, makes sure each has its Redis
// state, starts the pool of each one with work, and marks ended promotions
// with no work left drained. On the first pass every undrained promotion's
// pool is started, so entries left pending by a killed process are resumed.
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
	m.mu.Lock()
	prev := m.active
	m.active = fresh
	m.mu.Unlock()

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
	if err := m.checkFloors(ctx, list, refresh); err != nil {
		errs = append(errs, err)
	}
	// One pipelined round trip reads every promotion's backlog.
	works, werrs := m.groupWorks(ctx, list)
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
			if err := m.ensurePool(ctx, p); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if p.ended(now) && !m.reg.Running(p.ID) {
			if err := m.maybeDrain(ctx, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
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
	isEnded, seq, err := m.gate.Ended(ctx, p.ID)
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
	if err := m.st.SetDrained(ctx, p.ID, true); err != nil {
		return err
	}
	// A replay may have moved claims back into the pipeline, and a re-rank
	// may have taken a rank, since the counts were read: read both again,
	// and undo the drain if the database falls short (a replay that moves
	// its claims later undoes it itself).
	_, seq2, err := m.gate.Ended(ctx, p.ID)
	if err == nil {
		c, err = m.st.Counts(ctx, p.ID)
	}
	if err != nil || seq2 != seq || c.Issued+c.Failed+c.Voided < seq2 {
		if uerr := m.st.SetDrained(ctx, p.ID, false); uerr != nil {
			return errors.Join(err, uerr)
		}
		return err
	}
	m.mu.Lock()
	delete(m.active, p.ID)
	delete(m.specs, p.ID)
	m.mu.Unlock()
	m.fences.forget(p.ID)
	if m.cfg.OnDrained != nil {
		m.cfg.OnDrained(p.ID)
	}
	m.log.Info("promotion drained", "promotion", p.ID, "issued", c.Issued, "failed", c.Failed)
	return nil
}

// ensurePool starts the promotion's confirmation pool if it is not running
// and wakes it.
func (m *Manager) ensurePool(ctx context.Context, p Promotion) error {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return nil
	}
	spec := m.specLocked(p)
	m.mu.Unlock()
	// Ensure wakes a running pool under the registry's lock, which also
	// calls off an idle stop being decided at that moment, and starts a
	// stopped one: so new work is never left waiting for the re-check.
	if _, err := m.reg.Ensure(ctx, p.ID, spec); err != nil {
		return fmt.Errorf("start pool of %s: %w", p.ID, err)
	}
	return nil
}

// specLocked returns the pool spec of promotion p, made once per
// promotion. The caller holds m.mu.
func (m *Manager) specLocked(p Promotion) stream.Spec {
	if s, ok := m.specs[p.ID]; ok {
		return s
	}
	k := m.gate.Keys(p.ID)
	s := stream.Spec{
		Stream:           k.Stream(),
		Group:            claim.Group,
		Handler:          &issuer{m: m, promotionID: p.ID},
		Ack:              m.acker(p.ID),
		OnDeadLetter:     m.deadLetterer(p.ID),
		DeadLetterStream: k.DeadLetters(),
		ExpectedTotal:    p.Stock,
	}
	m.specs[p.ID] = s
	return s
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
