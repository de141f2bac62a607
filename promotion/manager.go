package promotion

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/hint"
	"github.com/dibsio/dibs/internal/startstop"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// Manager runs promotions. Create it with New, then Start it.
//
// Three kinds of goroutine run inside it (see docs/architecture.md):
//
//   - the loop (loop.go) owns the set of undrained promotions and their
//     pool specs, in a loop value only its goroutine holds: it re-checks
//     them every RecheckInterval, opens those Redis does not know, drains
//     ended ones and starts rebuilds. Other goroutines ask it over m.asks
//     and read what it publishes in m.known;
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
	batch  *claim.Batcher // nil with Config.UnbatchedClaims
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

	// running is true while the loop runs (from its first re-check to
	// Stop); written by the loop's goroutine and Stop, read by anyone.
	running atomic.Bool

	life startstop.Base // runs the loop, which runs the waker beside it

	// afterRecheck, if set, is called by the loop after each periodic
	// re-check; set by tests.
	afterRecheck atomic.Pointer[func()]

	rb     rebuilder   // background rebuilds after Redis lost writes (rebuild.go)
	dl     deadLetters // dead letters: record, replay, void, sweep (deadletters.go)
	ch     changes     // changes and revokes of promotions (patch.go, revoke.go)
	wk     waker       // starts and wakes pools (loop.go)
	ad     admission   // claims on their way to their scripts (ops.go, room.go)
	op     opener      // makes a promotion's Redis state exist (rebuild.go)
	rt     retirement  // retired promotions' Redis keys and views (retire.go)
	so     segmentOps  // a promotion over all its segments (segments.go)
	fences fences      // highest ranks known to be taken (fence.go)
	jr     journals    // claims answered and not yet seen confirmed (journal.go)

	// rates measures one consumer's confirmation rate (sizing.go); written
	// by the issuers, read by the loop.
	rates rateMeter
	// announced is set by the loop once it announced this instance in
	// the presence set; read by Stop.
	announced atomic.Bool
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
	var batch *claim.Batcher
	if !cfg.UnbatchedClaims {
		if batch, err = claim.NewBatcher(gate, claim.BatcherConfig{}); err != nil {
			return nil, fmt.Errorf("promotion manager: %w", err)
		}
	}
	reg, err := stream.NewRegistry(client, cfg.Instance, cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("promotion manager: %w", err)
	}
	m := &Manager{
		client: client,
		st:     st,
		gate:   gate,
		batch:  batch,
		reg:    reg,
		cfg:    cfg,
		log:    cfg.Logger,
		asks:   make(chan ask, askBacklog),
		wakes:  make(chan *handle, wakeBacklog),
		jr:     newJournals(cfg.JournalBytes),
		sold:   newSoldMemory(cfg.SoldOutMemory),
	}
	m.jr.m, m.sold.m, m.rb.m = m, m, m
	m.dl, m.ch, m.wk, m.ad = deadLetters{m}, changes{m}, waker{m}, admission{m}
	m.op, m.rt, m.so = opener{m}, retirement{m}, segmentOps{m}
	m.known.Store(&map[string]*handle{})
	if !cfg.DisableHints {
		m.hints, err = hint.New(client, hint.Config{
			Channel: func(id string) string { return gate.Keys(id).Hints() },
			OnHint: func(h hint.Hint) {
				m.sold.memoryHint(h)
				m.wk.hinted(h)
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
	err := m.life.StartContext(ctx, func(runCtx context.Context) {
		// The loop, and with it the waker and the sold-out memory, returns
		// only once runCtx ends (Stop): then they are waited for.
		var wg sync.WaitGroup
		defer wg.Wait()
		if m.hints != nil {
			if err := m.hints.Start(); err != nil {
				first <- err
				return
			}
			defer func() { _ = m.hints.Stop(context.Background()) }()
		}
		l := newLoop(m)
		if err := l.recheck(ctx, true); err != nil {
			first <- err
			return
		}
		m.running.Store(true)
		first <- nil
		wg.Go(func() { m.wk.runWaker(runCtx) })
		wg.Go(func() { m.jr.runJournals(runCtx) })
		if m.sold.ttl > 0 {
			wg.Go(func() { m.sold.runSoldMemory(runCtx) })
		}
		l.run(runCtx)
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
	if m.batch != nil {
		err = errors.Join(err, m.batch.Stop(ctx))
	}
	err = errors.Join(err, m.reg.Stop(ctx))
	if m.announced.Load() {
		// Best effort: the announcement expires anyway.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hintTimeout)
		_ = m.reg.Leave(lctx, m.presenceKey())
		cancel()
	}
	return err
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
