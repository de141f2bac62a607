package promotion

import (
	"sync/atomic"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// What the loop shares with the other goroutines: the handles of the
// undrained promotions, which it publishes as an immutable snapshot that
// anyone reads without a lock (published), and the requests it takes on
// one bounded channel (asks). Nothing else of the loop's is reachable from
// outside its goroutine.

// askBacklog bounds the requests waiting for the loop; a request that
// finds it full is answered at once (ErrNotReady, or dropped if it is a
// hint the next re-check covers).
const askBacklog = 1024

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
	// queued is set by whoever puts the handle on the waker's queue and
	// cleared by the waker when it takes it off, before it wakes the pool:
	// so a claim that finds it set is covered by that wake.
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
	// once. A re-check clears a wake only before it reads the database
	// (takeWakes), so a wake that comes later keeps that re-check, which
	// read what the wake's news may have changed, from marking it idle.
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

// claimPath is the path a promotion's claims take to their script: the
// loop picks it once, when it makes the handle (pathOf), and route
// (claimer.go) names the method that takes each claim down it.
type claimPath uint8

// The claim paths.
const (
	// pathRoomed: the claim script that spends a waiting room's pass; also
	// the path of the claims of a promotion not published here.
	pathRoomed claimPath = iota
	// pathPlain: the plain claim script, batched.
	pathPlain
	// pathSegmented: from the user's segment, borrowing from the others.
	pathSegmented
)

// published is the loop's published set of undrained promotions, by id (a
// segment's handle by its tag): a map the loop never changes once
// published (it publishes a new one). Written by the loop (and New); read
// by anyone, lock-free.
type published struct {
	p atomic.Pointer[map[string]*handle]
}

// lookup returns the published handle of id, nil if there is none.
func (s *published) lookup(id string) *handle { return (*s.p.Load())[id] }

// snapshot returns the published set; the caller must not change it.
func (s *published) snapshot() map[string]*handle { return *s.p.Load() }

// replace publishes set, which nobody may change from now on.
func (s *published) replace(set map[string]*handle) { s.p.Store(&set) }

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
	// (the script marked it rebuilding): start its rebuild.
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

// asks carries requests to the loop; bounded, senders never block.
type asks chan ask

// send sends a request to the loop without blocking; false if its backlog
// is full.
func (c asks) send(a ask) bool {
	select {
	case c <- a:
		return true
	default:
		return false
	}
}
