package promotion

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/hint"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// The Manager's loop owns the set of undrained promotions. Everything that
// needs the database or may change that set runs in it: the re-check every
// RecheckInterval (recheck.go, floors.go), the dead-letter and revoke
// sweep, the retirement pass, opening a promotion Redis does not know,
// and starting the rebuild of one a claim found lost (run.go). Other
// goroutines ask it over its bounded channel (asks, through the loop
// client), never block on it for longer than Config.OpenWait, and read the
// promotions it publishes (published) without a lock. A claim is one
// script call plus a non-blocking wake of its pool (wakePool), and never
// reaches the database.

// maxRemembered bounds the loop's records of recent opens and lookups
// (used only to answer requests queued behind the same open at once), and
// the rebuilder's record of the rebuilds that ended.
const maxRemembered = 4096

// loopParts are what the loop works with besides its own state: the
// Manager's parts, which New wires and Start hands to newLoop.
type loopParts struct {
	client rueidis.Client
	st     store.Store
	gate   *claim.Gate
	reg    *stream.Registry
	hints  *hint.Bus // nil with Config.DisableHints
	cfg    Config
	log    *slog.Logger

	known  *published // what the loop publishes
	asks   asks       // what the loop is asked
	fences *fences
	op     *opener
	rb     *rebuilder
	wk     *waker
	pools  *streamPools
	so     *segmentOps
	dl     *deadLetters
	rv     *revokes
	rt     *retirement
	rates  *rateMeter
	// announced is set once the instance announced itself (sizer).
	announced *atomic.Bool
	// afterRecheck, if set, is called after each periodic re-check (by
	// tests).
	afterRecheck *atomic.Pointer[func()]
}

// loop is the state of the Manager's owner goroutine: the set of undrained
// promotions and what the loop remembers about them. Start makes it and
// hands it to the loop's goroutine only (after Start's first re-check, on
// the same goroutine): nothing else holds it, so no request can reach its
// fields. Requests talk to it over its asks and read what it publishes.
type loop struct {
	loopParts

	active  map[string]Promotion // undrained promotions' definitions
	handles map[string]*handle   // what the loop publishes
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
	sizes   sizer // the pools' sizes (sizing.go)
	// For retirement (retire.go): when the last retirement pass began
	// (zero before the first).
	lastRetire time.Time
}

// newLoop makes the loop over parts p, with nothing tracked yet.
func newLoop(p loopParts) *loop {
	return &loop{
		loopParts:     p,
		active:        make(map[string]Promotion),
		handles:       make(map[string]*handle),
		opened:        make(map[string]time.Time),
		missing:       make(map[string]time.Time),
		gone:          make(map[string]bool),
		idleAt:        make(map[string]uint64),
		confirmedSeen: make(map[string]int64),
		pr:            probe{client: p.client, prefix: p.cfg.Prefix, instance: p.cfg.Instance, log: p.log},
		sizes: sizer{reg: p.reg, rates: p.rates, announced: p.announced, presence: presenceKey(p.cfg.Prefix),
			every: sizeEvery * p.cfg.RecheckInterval, now: p.cfg.Now, log: p.log},
	}
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

// publish publishes a copy of the handles, and has the hint bus listen on
// the channels of exactly these promotions.
func (l *loop) publish() {
	snap := make(map[string]*handle, len(l.handles))
	ids := make([]string, 0, len(l.handles))
	for id, h := range l.handles {
		snap[id] = h
		ids = append(ids, id)
	}
	l.known.replace(snap)
	if l.hints != nil {
		l.hints.Watch(ids)
	}
}

// newHandle makes the handle of promotion p, with its pool spec.
func (l *loop) newHandle(p Promotion) *handle {
	h := &handle{id: p.ID, room: p.WaitingRoom.Enabled, segs: p.layout(), claim: pathOf(p)}
	h.size.Store(l.sizes.size(p))
	sp := p.toStore()
	h.promo.Store(&sp)
	h.spec = l.pools.spec(p, p.ID, h.segs.Share(0, p.Stock), h)
	return h
}

// segmentHandles makes the handles of p's segments 1..N-1.
func (l *loop) segmentHandles(p Promotion, segs claim.Segments) []*handle {
	out := make([]*handle, 0, segs.N()-1)
	for k := 1; k < segs.N(); k++ {
		tag := segs.Tag(k)
		h := &handle{id: tag, segs: segs, claim: pathSegmented}
		h.size.Store(l.sizes.size(p))
		sp := p.toStore()
		h.promo.Store(&sp)
		h.spec = l.pools.spec(p, tag, segs.Share(k, p.Stock), h)
		out = append(out, h)
	}
	return out
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
