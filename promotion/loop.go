package promotion

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// The Manager's loop owns the set of undrained promotions. Everything that
// needs the database or may change that set runs in it: the re-check every
// RecheckInterval, the dead-letter sweep, opening a promotion Redis does not
// know, and starting the rebuild of one a claim found lost. Other
// goroutines ask it over m.asks, never block on it for longer than
// Config.OpenWait, and read the promotions it publishes in m.known without
// a lock. A claim is one script call plus a non-blocking wake of its pool
// (wakePool), and never reaches the database.

const (
	// askBacklog bounds the requests waiting for the loop; a request that
	// finds it full is answered at once (ErrNotReady, or dropped if it is a
	// hint the next re-check covers).
	askBacklog = 1024
	// wakeBacklog bounds the pools waiting for the waker; a wake that finds
	// it full is dropped, and the next re-check starts the pool.
	wakeBacklog = 1024
	// maxRemembered bounds the loop's records of recent opens and lookups
	// (used only to answer requests queued behind the same open at once).
	maxRemembered = 4096
)

// loop is the state of the Manager's owner goroutine: the set of undrained
// promotions and what the loop remembers about them. Start makes it and
// hands it to the loop's goroutine only (after Start's first re-check, on
// the same goroutine): nothing else holds it, so no request can reach its
// fields. Requests talk to it over Manager.asks and read what it
// publishes in Manager.known.
type loop struct {
	// m is the Manager the loop works for: its asks, its published
	// snapshot, its rebuilder and fences, and the request-side steps the
	// loop shares (open, load).
	m      *Manager
	client rueidis.Client
	st     store.Store
	gate   *claim.Gate
	reg    *stream.Registry
	cfg    Config
	log    *slog.Logger

	active  map[string]Promotion // undrained promotions' definitions
	handles map[string]*handle   // what m.known publishes
	opened  map[string]time.Time // when an open of the id last succeeded
	missing map[string]time.Time // when a lookup of the id last found none
	gone    map[string]bool      // retired promotions seen (bounded by maxRemembered)
	// idleAt holds the idle promotions (recheck.go), each with the probes
	// done when it was found idle: it is left out of re-checks only once a
	// later probe ran (probe.go).
	idleAt map[string]uint64
	// confirmedSeen is each promotion's confirmed rank as its last full
	// re-check read it from Redis: what an idle one's database is compared
	// with.
	confirmedSeen map[string]int64
	// lastDue holds the promotions the last re-check looked at, with the
	// marks it read (zero if it could not).
	lastDue map[string]claim.Mark
	pr      probe // the loss probe (probe.go)
	// For sizing (sizing.go): the live instance count last read (0
	// before any) and when.
	instances int
	lastCount time.Time
	// For retirement (retire.go): when the last retirement pass began
	// (zero before the first).
	lastRetire time.Time
}

// newLoop makes the loop of m, with nothing tracked yet.
func newLoop(m *Manager) *loop {
	return &loop{
		m:             m,
		client:        m.client,
		st:            m.st,
		gate:          m.gate,
		reg:           m.reg,
		cfg:           m.cfg,
		log:           m.log,
		active:        make(map[string]Promotion),
		handles:       make(map[string]*handle),
		opened:        make(map[string]time.Time),
		missing:       make(map[string]time.Time),
		gone:          make(map[string]bool),
		idleAt:        make(map[string]uint64),
		confirmedSeen: make(map[string]int64),
	}
}

// handle is the loop's published record of one undrained promotion: what a
// claim needs to wake the promotion's pool. Its id and spec never change.
type handle struct {
	id   string
	spec stream.Spec
	// room is whether the promotion has a waiting room: its claims run the
	// claim script that spends a pass.
	room bool
	// claim is the path the promotion's claims take to their script
	// (pathOf), chosen when the loop makes the handle.
	claim claimPath
	// queued is set by whoever puts the handle on m.wakes and cleared by the
	// waker when it takes it off, before it wakes the pool: so a claim that
	// finds it set is covered by that wake.
	queued atomic.Bool
	// tell is set, before queued, by a wake for work this instance added
	// (a claim, a grant, a replay) and taken by the waker: if it starts the
	// pool, it tells the other instances (a hint). A wake from a hint
	// leaves it alone, so hints are not echoed.
	tell atomic.Bool
	// quietUntil is when the promotion's next idle re-check is due (unix
	// ns of Config.Now), or not positive when it is re-checked every
	// RecheckInterval: set by the loop when a re-check found it idle and
	// reset to 0 by the loop when it looks again; every wake (a claim here,
	// a hint from elsewhere) sets it to woken, which makes it ordinary at
	// once, and keeps a re-check that began before the wake from marking it
	// idle.
	quietUntil atomic.Int64
	// journaled is how many claims answered here the promotion's journal
	// holds (journal.go): written by the journal goroutine once per prune,
	// read by the loop.
	journaled atomic.Int64
	// segs is the promotion's segment layout (segments.go); every segment's
	// handle holds the promotion's. Never changes.
	segs claim.Segments
	// size is the consumer count the promotion's pool starts with, 0 for
	// the stream's own sizing (sizing.go): written by the loop, read by
	// the pool when it starts (spec.Size).
	size atomic.Int32
	// codes is the size of the promotion's code pool plus one as the loop
	// last read it, 0 when not read or dropped by a change (forgetCached):
	// written by the loop (withCodes), dropped by anyone.
	codes atomic.Int64
	// promo is the promotion's definition as the loop last read it, what
	// the pool's issuer hands to the kind's issue.Issuer: stored by the
	// loop only (newHandle, segmentHandles, refreshHandles), never
	// modified once stored, and loaded by the pool's handler for each batch
	// (liveIssuer), so a change (a rename) reaches a running pool.
	promo atomic.Pointer[store.Promotion]
}

// askKind says what a request to the loop is for.
type askKind int

const (
	// askOpen: open promotion id in Redis (reading its definition from the
	// database unless def is given) and answer on done if set.
	askOpen askKind = iota + 1
	// askPool: make sure promotion id's pool runs: a claim succeeded on a
	// promotion the loop has not published yet (created on another
	// instance a moment ago).
	askPool
	// askLost: a claim or an issuer found Redis lost writes of promotion id
	// (the script paused it): start its rebuild.
	askLost
	// askJournalLost: the journal found claims this instance answered
	// that Redis lost on promotion id, which was not rebuilt since: start
	// its rebuild (journal.go).
	askJournalLost
	// askRefresh: promotion id changed (a hint.Changed, or a Patch here):
	// read its definition from the database and hand it to its running
	// pools (refreshHandles); answer on done if set.
	askRefresh
)

// woken is handle.quietUntil after a wake.
const woken = -1

// ask is one request to the loop.
type ask struct {
	kind askKind
	id   string
	// def is the promotion's definition when the asker has it (Create,
	// Close); hasDef says it is set.
	def    Promotion
	hasDef bool
	// asked is when the request was made (monotonic): an open of id that
	// succeeded, or a lookup that found none, after it answers it.
	asked time.Time
	// done receives the answer of an askOpen; buffered, so the loop never
	// blocks on an asker that gave up. nil for the other kinds.
	done chan error
}

// run is the Manager's owner goroutine; it returns when ctx ends.
func (l *loop) run(ctx context.Context) {
	t := time.NewTicker(l.cfg.RecheckInterval)
	defer t.Stop()
	var lastSweep time.Time // the first tick sweeps: a restart finishes what a crash left
	pe := newPromotionEvents(l.m)
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-l.m.asks:
			l.serve(ctx, a)
		case <-t.C:
			if err := l.recheck(ctx, false); err != nil && ctx.Err() == nil {
				l.log.Warn("re-check of promotions failed", "err", err)
			}
			pe.observe(ctx, l.active, l.lastDue)
			if f := l.m.afterRecheck.Load(); f != nil {
				(*f)()
			}
			if now := l.cfg.Now(); now.Sub(lastSweep) >= sweepEvery*l.cfg.RecheckInterval {
				lastSweep = now
				if err := l.m.dl.sweep(ctx); err != nil && ctx.Err() == nil {
					l.log.Warn("dead-letter sweep failed", "err", err)
				}
			}
			l.maybeRetire(ctx)
			l.forgetOld()
		}
	}
}

// serve answers one request, in the loop.
func (l *loop) serve(ctx context.Context, a ask) {
	switch a.kind {
	case askOpen, askPool:
		err := l.serveOpen(ctx, a)
		if a.done != nil {
			a.done <- err
		}
		if err == nil && a.kind == askPool {
			if _, err := l.m.wk.startOrWakePool(ctx, l.handles[a.id]); err != nil {
				l.log.Warn("cannot start confirmation pool; the next re-check retries", "promotion", a.id, "err", err)
			}
		}
	case askLost:
		if l.m.rb.busy(a.id) {
			return
		}
		l.log.Warn("Redis lost writes: claims are paused until the promotion is rebuilt",
			"promotion", a.id, "known_rank", l.m.fences.get(a.id))
		if p, ok := l.active[a.id]; ok {
			l.m.rb.startRebuild(p, reasonFenced, false)
			return
		}
		l.m.rb.startRebuildWith(a.id, func(ctx context.Context) (Promotion, error) { return l.m.load(ctx, a.id) }, reasonFenced, false)
	case askJournalLost:
		// A rebuild that ended since the journal asked resumed after the
		// loss it found: the next prune puts the claims back (or asks again).
		if !l.m.rb.endedAfter(a.id, a.asked) {
			l.rebuildForJournal(a.id)
		}
	case askRefresh:
		err := l.refresh(ctx, a.id)
		if err != nil && ctx.Err() == nil {
			l.log.Debug("cannot read a changed promotion; the next re-check does", "promotion", a.id, "err", err)
		}
		if a.done != nil {
			a.done <- err
		}
	}
}

// refresh reads promotion id's definition again, if the loop tracks it,
// and hands it to its handles and its entry in l.active.
func (l *loop) refresh(ctx context.Context, id string) error {
	if l.handles[id] == nil {
		return nil // not tracked: its handles are made from a fresh read
	}
	p, err := l.m.load(ctx, id)
	if err != nil {
		return err
	}
	if _, ok := l.active[id]; ok {
		l.active[id] = p
	}
	l.refreshHandles(p)
	return nil
}

// refreshHandles hands p's definition to the handles of p and of its
// segments, read by their pools from their next batch on.
func (l *loop) refreshHandles(p Promotion) {
	h := l.handles[p.ID]
	if h == nil {
		return
	}
	sp := p.toStore()
	for _, tag := range h.segs.Tags() {
		if sh := l.handles[tag]; sh != nil {
			sh.promo.Store(&sp)
		}
	}
}

// awaitRefresh asks the loop to read promotion id again (askRefresh) and
// waits for it at most Config.OpenWait, so the instance that made a change
// hands it to its running pools before it answers. A refresh that did not
// happen in time (or failed) is done by the next re-check. No-op when no
// loop runs (no pools run either).
func (m *Manager) awaitRefresh(ctx context.Context, id string) {
	if !m.running.Load() {
		return
	}
	a := ask{kind: askRefresh, id: id, asked: time.Now(), done: make(chan error, 1)}
	if !m.ask(a) {
		return
	}
	t := time.NewTimer(m.cfg.OpenWait)
	defer t.Stop()
	select {
	case <-a.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// serveOpen opens the promotion of a, unless an open of it succeeded (or a
// lookup found none) since a was asked: then requests queued behind one
// open are answered by it.
func (l *loop) serveOpen(ctx context.Context, a ask) error {
	if at, ok := l.opened[a.id]; ok && at.After(a.asked) && !a.hasDef {
		return nil
	}
	if at, ok := l.missing[a.id]; ok && at.After(a.asked) {
		return ErrNotFound
	}
	if l.gone[a.id] {
		return errRetired
	}
	p := a.def
	if !a.hasDef {
		var err error
		if p, err = l.m.load(ctx, a.id); errors.Is(err, ErrNotFound) {
			l.remember(l.missing, a.id)
			return err
		} else if err != nil {
			return err
		}
	}
	if p.retired() {
		// Retired, not lost: its Redis state is never made again.
		if len(l.gone) >= maxRemembered {
			clear(l.gone)
		}
		l.gone[p.ID] = true
		return errRetired
	}
	if err := l.m.op.open(ctx, p); err != nil {
		return err
	}
	l.active[p.ID] = p
	l.track([]Promotion{p}, false)
	l.remember(l.opened, p.ID)
	delete(l.missing, p.ID)
	return nil
}

// remember records now for id in one of the loop's bounded records.
func (l *loop) remember(rec map[string]time.Time, id string) {
	if len(rec) >= maxRemembered {
		clear(rec)
	}
	rec[id] = time.Now()
}

// forgetOld drops records older than any request still waiting can be.
func (l *loop) forgetOld() {
	horizon := time.Now().Add(-l.cfg.OpenWait)
	for _, rec := range []map[string]time.Time{l.opened, l.missing} {
		for id, at := range rec {
			if at.Before(horizon) {
				delete(rec, id)
			}
		}
	}
}

// track makes sure every promotion in list has a handle, and hands each
// handle its promotion's definition from list; with exact, the
// promotions not in list lose theirs (list is every undrained one). It
// publishes the set again if it changed.
func (l *loop) track(list []Promotion, exact bool) {
	changed := false
	in := make(map[string]bool, len(list))
	for _, p := range list {
		in[p.ID] = true
		if _, ok := l.handles[p.ID]; !ok {
			h := l.newHandle(p)
			l.handles[p.ID] = h
			changed = true
			for _, sh := range l.segmentHandles(p, h.segs) {
				l.handles[sh.id] = sh
			}
		} else {
			// The database's definition, read by this re-check: a change
			// another instance's hint did not bring reaches the pools here.
			l.refreshHandles(p)
		}
		for _, tag := range l.handles[p.ID].segs.Tags()[1:] {
			in[tag] = true
		}
	}
	if exact {
		for id := range l.handles {
			if !in[id] {
				delete(l.handles, id)
				changed = true
			}
		}
	}
	if changed {
		l.publish()
	}
}

// untrack drops the handle of a drained promotion.
func (l *loop) untrack(id string) {
	delete(l.idleAt, id)
	delete(l.confirmedSeen, id)
	if h, ok := l.handles[id]; ok {
		for _, tag := range h.segs.Tags() {
			delete(l.handles, tag)
		}
		l.publish()
	}
}

// publish stores a copy of the handles in m.known, and has the hint bus
// listen on the channels of exactly these promotions.
func (l *loop) publish() {
	snap := make(map[string]*handle, len(l.handles))
	ids := make([]string, 0, len(l.handles))
	for id, h := range l.handles {
		snap[id] = h
		ids = append(ids, id)
	}
	l.m.known.Store(&snap)
	if l.m.hints != nil {
		l.m.hints.Watch(ids)
	}
}

// newHandle makes the handle of promotion p, with its pool spec.
func (l *loop) newHandle(p Promotion) *handle {
	h := &handle{id: p.ID, room: p.WaitingRoom.Enabled, segs: p.layout(), claim: pathOf(p)}
	h.size.Store(l.poolSize(p))
	sp := p.toStore()
	h.promo.Store(&sp)
	h.spec = l.m.poolSpec(p, p.ID, h.segs.Share(0, p.Stock), h)
	return h
}

// ask sends a request to the loop without blocking; false if its backlog
// is full.
func (m *Manager) ask(a ask) bool {
	select {
	case m.asks <- a:
		return true
	default:
		return false
	}
}

// awaitOpen asks the loop to open promotion id (with def, if hasDef) and
// waits for the answer at most Config.OpenWait: ErrNotFound if the
// database has no such promotion, ErrNotReady if the loop did not finish in
// time (or has too much to do), nil once Redis holds the promotion. The
// caller runs no database query — unless no loop runs (before Start or
// after Stop: a program that only creates promotions, say), when there is
// no owner to ask and the caller opens the promotion itself.
func (m *Manager) awaitOpen(ctx context.Context, id string, def Promotion, hasDef bool) error {
	if !m.running.Load() {
		if !hasDef {
			var err error
			if def, err = m.load(ctx, id); err != nil {
				return err
			}
		}
		if def.retired() {
			return errRetired
		}
		return m.op.open(ctx, def)
	}
	a := ask{kind: askOpen, id: id, def: def, hasDef: hasDef, asked: time.Now(), done: make(chan error, 1)}
	if !m.ask(a) {
		return ErrNotReady
	}
	t := time.NewTimer(m.cfg.OpenWait)
	defer t.Stop()
	select {
	case err := <-a.done:
		return err
	case <-t.C:
		return ErrNotReady
	case <-ctx.Done():
		return ctx.Err()
	}
}

// liveIssuer is the handler of a promotion's (or segment's) pool: the
// issuer, handed for each batch the promotion's definition as the loop last
// read it (handle.promo), so a change made while the pool runs (a rename)
// reaches what the kind's issuer sees without restarting the pool.
type liveIssuer struct {
	h    *handle
	base issuer
}

// Handle implements stream.Handler.
func (l *liveIssuer) Handle(ctx context.Context, msgs []stream.Message) []error {
	is := l.base
	is.promo = *l.h.promo.Load()
	return is.Handle(ctx, msgs)
}

// reportLost tells the loop that a claim or an issuer found Redis lost
// writes of promotion id: the script paused it, and the loop starts the
// rebuild. Never blocks; if the loop's backlog is full, the next re-check
// finds the promotion paused and takes it over.
func (m *Manager) reportLost(id string) {
	m.ask(ask{kind: askLost, id: id, asked: time.Now()})
}
