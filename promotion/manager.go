package promotion

import (
	"context"
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
// Its exported methods are the requests; it hands its duties to named
// parts (see docs/architecture.md), each holding only what it uses, which
// New wires. These goroutines run inside it:
//
//   - the loop (loop.go, run.go) owns the set of undrained promotions and
//     their pool specs, in a loop value only its goroutine holds: it
//     re-checks them every RecheckInterval, opens those Redis does not
//     know, drains ended ones and starts rebuilds. Other goroutines ask it
//     through the loop client (loopclient.go) and read what it publishes
//     (published, handle.go);
//   - the waker (waker.go) starts or wakes the confirmation pools that
//     claims and hints queue, so a claim never waits for a pool, and tells
//     the other instances when it started one for new claims;
//   - the journal goroutine (journal.go) keeps the claims answered here
//     until it sees them confirmed;
//   - the sold-out memory's goroutine (soldout.go);
//   - the hint bus (internal/hint) listens for the other instances' hints
//     on each undrained promotion's channel and queues a wake for each;
//   - the rebuilder's goroutines (rebuilder.go), one per promotion being
//     rebuilt.
//
// The issuers (issuer.go) run in the stream pools' goroutines.
type Manager struct {
	client rueidis.Client
	st     store.Store
	gate   *claim.Gate
	batch  *claim.Batcher // nil with Config.UnbatchedClaims
	reg    *stream.Registry
	hints  *hint.Bus // nil with Config.DisableHints
	cfg    Config
	log    *slog.Logger

	known published // the loop's published promotions
	asks  asks      // requests to the loop
	life  startstop.Base
	// afterRecheck, if set, is called by the loop after each periodic
	// re-check; set by tests.
	afterRecheck atomic.Pointer[func()]
	// announced is set by the loop once it announced this instance in
	// the presence set; read by Stop.
	announced atomic.Bool
	// rates measures one consumer's confirmation rate (sizing.go); written
	// by the issuers, read by the loop.
	rates  rateMeter
	fences fences // highest ranks known to be taken (fence.go)

	// The parts, in the order New wires them: each uses only those above it.
	sold  *soldMemory // the sold-out memory (soldout.go)
	wk    waker       // starts and wakes pools; hints in and out (waker.go)
	jr    journals    // claims answered and not yet seen confirmed (journal.go)
	rb    rebuilder   // background rebuilds after Redis lost writes (rebuilder.go)
	rooms roomOps     // the waiting rooms in Redis (roomops.go)
	op    opener      // makes a promotion's Redis state exist (opener.go)
	lc    loopClient  // the request side's way to the loop (loopclient.go)
	cl    claimer     // claims on their way to their scripts (claimer.go)
	so    segmentOps  // a promotion over all its segments (segments.go)
	vw    views       // what a request shows of a promotion (views.go)
	dl    deadLetters // dead letters: record, replay, void, sweep (deadletters.go)
	iss   issuing     // what the issuers work with (issuer.go)
	pools streamPools // the confirmation pools' specs and backlogs (streampools.go)
	rt    retirement  // retired promotions' Redis state (retire.go)
	ch    changes     // changes of promotions (patch.go)
	rv    revokes     // revokes of issued claims (revoke.go)
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
	m := &Manager{client: client, st: st, gate: gate, batch: batch, reg: reg, cfg: cfg, log: cfg.Logger,
		asks: make(asks, askBacklog)}
	m.known.replace(map[string]*handle{})
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
	m.wire()
	return m, nil
}

// wire hands each part what it uses, each made after the parts it uses.
func (m *Manager) wire() {
	cfg, st, gate, log := m.cfg, m.st, m.gate, m.log
	m.sold = newSoldMemory(&m.known, gate, m.client, m.hints, cfg)
	m.wk = newWaker(&m.known, m.asks, m.reg, m.hints, m.sold, log)
	m.jr = newJournals(gate, &m.known, m.asks, &m.wk, cfg)
	m.rb = rebuilder{gate: gate, st: st, log: log, fences: &m.fences, wk: &m.wk, now: cfg.Now, instance: cfg.Instance,
		onRebuild: cfg.OnRebuild, onHalted: cfg.OnHalted, verify: &m.jr.verify}
	m.rooms = roomOps{rooms: cfg.Rooms, prefix: cfg.Prefix, log: log}
	m.op = opener{st: st, gate: gate, rooms: &m.rooms, fences: &m.fences, rb: &m.rb, log: log}
	m.lc = loopClient{asks: m.asks, known: &m.known, st: st, op: &m.op, openWait: cfg.OpenWait}
	m.cl = claimer{gate: gate, batch: m.batch, known: &m.known, lc: &m.lc, wk: &m.wk, jr: &m.jr, sold: m.sold,
		fences: &m.fences, rooms: &m.rooms, onRemaining: cfg.OnRemaining}
	m.so = segmentOps{gate: gate, st: st, known: &m.known}
	m.vw = views{st: st, so: &m.so, lc: &m.lc, rooms: &m.rooms, now: cfg.Now}
	m.dl = deadLetters{st: st, gate: gate, so: &m.so, wk: &m.wk, cfg: cfg, log: log}
	m.iss = issuing{st: st, gate: gate, cfg: cfg, log: log, rates: &m.rates, fences: &m.fences, wk: &m.wk, lc: &m.lc, dl: &m.dl}
	m.pools = streamPools{client: m.client, gate: gate, log: log, dl: &m.dl, issuing: &m.iss}
	m.rt = retirement{client: m.client, gate: gate, st: st, reg: m.reg, pools: &m.pools, so: &m.so, rooms: cfg.Rooms,
		fences: &m.fences, log: log, retention: cfg.Retention}
	m.ch = changes{st: st, gate: gate, lc: &m.lc, wk: &m.wk, rooms: &m.rooms, now: cfg.Now, log: log}
	m.rv = revokes{st: st, gate: gate, wk: &m.wk, cfg: cfg, log: log}
}

// loopParts are the parts the loop works with.
func (m *Manager) loopParts() loopParts {
	return loopParts{client: m.client, st: m.st, gate: m.gate, reg: m.reg, hints: m.hints, cfg: m.cfg, log: m.log,
		known: &m.known, asks: m.asks, fences: &m.fences, op: &m.op, rb: &m.rb, wk: &m.wk, pools: &m.pools,
		so: &m.so, dl: &m.dl, rv: &m.rv, rt: &m.rt, rates: &m.rates, announced: &m.announced,
		afterRecheck: &m.afterRecheck}
}

// Gate returns the claim gate the manager uses.
func (m *Manager) Gate() *claim.Gate { return m.gate }

// Registry returns the stream registry that runs the confirmation pools.
func (m *Manager) Registry() *stream.Registry { return m.reg }

// Records returns the Manager's records.
func (m *Manager) Records() Records { return Records{st: m.st} }

// ConsumerClaimRate is the measured claims per second one consumer of this
// instance confirms while busy (0 before any was measured).
func (m *Manager) ConsumerClaimRate() float64 { return m.rates.rate() }

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
		l := newLoop(m.loopParts())
		if err := l.recheck(ctx, true); err != nil {
			first <- err
			return
		}
		m.lc.running.Store(true)
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
	m.lc.running.Store(false)
	err := m.life.Stop(ctx)
	m.rb.stop()
	if m.batch != nil {
		err = errors.Join(err, m.batch.Stop(ctx))
	}
	err = errors.Join(err, m.reg.Stop(ctx))
	if m.announced.Load() {
		// Best effort: the announcement expires anyway.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hintTimeout)
		_ = m.reg.Leave(lctx, presenceKey(m.cfg.Prefix))
		cancel()
	}
	return err
}
