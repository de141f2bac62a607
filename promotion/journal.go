package promotion

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dibsio/dibs/claim"
)

// The journal: each instance remembers the claims it answered 202 until it
// sees them confirmed, and puts back those Redis lost.
//
// A claim is answered as soon as the claim script ran in Redis's memory. If
// Redis then loses a suffix of its history (a crash under appendfsync
// everysec, a restore of an older snapshot, a failover to a lagging
// replica) before any issuer read the claim, nothing in Redis or the
// database holds it any more — but the instance that answered it is alive
// and knows it. So every Manager keeps, per promotion, a journal of the
// claims it answered and has not seen confirmed: rank, user, slot,
// Idempotency-Key and acceptance time, compactly (journalstore.go).
//
//   - The claim path puts the claim on the journals' inbox, one bounded
//     channel, without blocking and without a lock; a claim that finds it
//     full is dropped and counted.
//   - The journal goroutine (one per Manager) owns the journals. It drains
//     the inbox as claims come, and never waits on the database, so a
//     stalled database cannot stall it. The journals share one memory
//     budget (Config.JournalBytes); a claim that finds it spent, after an
//     early prune, is not journaled, counted (Config.OnJournalDropped) and
//     logged once.
//   - Every RecheckInterval it prunes: per promotion, it reads what Redis
//     holds of the oldest claims not yet seen confirmed — the confirmation
//     front — in slices of journalSlice claims per read, going further
//     (twice as many slices each round trip) only while a slice found
//     claims confirmed. A claim whose status is issued, failed, voided or
//     revoked, with its rank in its user's list, is forgotten; one still
//     pending stays. So a database that cannot confirm costs one slice per
//     promotion per prune, however many claims wait.
//   - A claim with no status, or whose rank its user's list lacks, was
//     lost by Redis. Claims beyond the front are read in full (a
//     verification, paced at slicesPerPass slices a prune) only when a
//     loss is suspected: a rebuild started, or the loss probe found a Redis
//     master that lost writes (probe.go).
//   - A lost claim is put back by claim.Gate.Requeue, under its original
//     rank, slot and claim id — but only on a promotion rebuilt from the
//     database after the loss, so that what the database holds is merged
//     first: the first attempt finds it not rebuilt since, the loop is asked
//     to rebuild it, and a prune after it puts the claims back. A rank
//     another claim took meanwhile (the window no fence sees) is put back
//     as a collision, and the issuer re-ranks one of the two.
//
// What the journal cannot put back: claims answered by an instance that
// died before Redis's loss was repaired, claims it did not keep (budget
// spent, inbox full, a user id or key over 255 bytes), and grants (their
// uploads are idempotent: upload again).

const (
	// inboxSize bounds the claims waiting for the journal goroutine: a
	// third of a second at 48,000 claims/s, where the goroutine drains the
	// inbox between any two Redis round trips (a few ms at most).
	inboxSize = 16384
	// journalSlice bounds the claims of one read of a prune.
	journalSlice = 100
	// sliceTrip bounds the slices of one pipelined round trip.
	sliceTrip = 64
	// slicesPerPass bounds the slices one prune reads: 200,000 claims.
	slicesPerPass = 2000
	// requeuePerPass bounds the claims one prune puts back.
	requeuePerPass = 1000
)

// inboxed is a claim on its way to its promotion's journal.
type inboxed struct {
	id string
	a  accepted
}

// journals is the Manager's state of the journals.
type journals struct {
	gate   *claim.Gate
	known  *published // whose handles it tells their journaled counts
	asks   asks       // for the rebuild of a promotion whose claims Redis lost
	wk     *waker
	cfg    Config
	log    *slog.Logger
	budget int64
	// in carries claims to the journal goroutine; bounded, senders never
	// block (a claim that finds it full is counted in inDropped).
	in        chan inboxed
	inDropped atomic.Int64
	// verify asks the next prune to read every journaled claim: Redis may
	// have lost writes. Set by anyone.
	verify atomic.Bool
	// peak is the most claims seen waiting in the inbox, and reads the
	// slices of claims read from Redis (both for tests and benchmarks).
	peak, reads atomic.Int64
	// warned is set once each reason of a drop was logged.
	warnedBudget, warnedInbox, warnedLong atomic.Bool
	// Owned by the journal goroutine.
	byID      map[string]*journal
	bytes     int64     // memory of every journal
	pruning   bool      // a prune runs (an early prune is not nested in it)
	lastEarly time.Time // when a spent budget last pruned early
}

func newJournals(gate *claim.Gate, known *published, a asks, wk *waker, cfg Config) journals {
	return journals{gate: gate, known: known, asks: a, wk: wk, cfg: cfg, log: cfg.Logger, budget: cfg.JournalBytes,
		in: make(chan inboxed, inboxSize), byID: make(map[string]*journal)}
}

// journalAccepted records that this instance answered res to userID in
// promotion id. It never blocks and takes no lock: called on the claim
// path.
func (js *journals) journalAccepted(id, userID, idemKey string, res claim.Result) {
	a := accepted{rank: res.Rank, user: userID, slot: res.Slot, at: res.AcceptedAt.UnixMilli(), idem: idemKey}
	select {
	case js.in <- inboxed{id: id, a: a}:
	default:
		js.inDropped.Add(1)
	}
}

// journalDropped counts n claims of promotion id that the journal could not
// keep, and logs the first of each reason. Safe from any goroutine.
func (js *journals) journalDropped(id string, n int64, why *atomic.Bool, msg string) {
	if why.CompareAndSwap(false, true) {
		js.log.Warn(msg+"; they could not be put back if Redis lost them now (further drops are only counted in dibs_journal_dropped_total)",
			"promotion", id, "dropped", n, "journal_bytes", js.bytes, "journal_budget_bytes", js.budget)
	}
	if js.cfg.OnJournalDropped != nil {
		js.cfg.OnJournalDropped(id, int(n))
	}
}

// runJournals is the journal goroutine: it moves claims from the inbox
// into the journals as they come and prunes every RecheckInterval, until
// ctx ends.
func (js *journals) runJournals(ctx context.Context) {
	t := time.NewTicker(js.cfg.RecheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-js.in:
			js.journalAdd(ctx, it)
			js.drainInbox(ctx)
		case <-t.C:
			js.recheckJournals(ctx)
		}
	}
}

// drainInbox moves the claims waiting in the inbox now into the journals.
// Journal goroutine only.
func (js *journals) drainInbox(ctx context.Context) {
	n := len(js.in)
	if int64(n) > js.peak.Load() {
		js.peak.Store(int64(n))
	}
	for ; n > 0; n-- {
		js.journalAdd(ctx, <-js.in)
	}
	if n := js.inDropped.Swap(0); n > 0 {
		js.journalDropped("", n, &js.warnedInbox, "the journal's inbox was full: claims answered were not journaled")
	}
}

// journalAdd appends a claim to its promotion's journal. With the budget
// spent it prunes first (at most eight times per re-check interval); if the
// budget is still spent, the claim is not journaled. Journal goroutine
// only.
func (js *journals) journalAdd(ctx context.Context, it inboxed) {
	if !it.a.fits() {
		js.journalDropped(it.id, 1, &js.warnedLong, "a claim's user id or Idempotency-Key is over 255 bytes: it is not journaled")
		return
	}
	j := js.byID[it.id]
	if j == nil {
		j = &journal{after: map[uint64]int64{}, retry: map[uint64]bool{}}
		js.byID[it.id] = j
	}
	if js.bytes+j.need(it.a) > js.budget {
		if now := time.Now(); !js.pruning && now.Sub(js.lastEarly) >= js.cfg.RecheckInterval/8 {
			js.lastEarly = now
			js.prunePass(ctx)
		}
		if js.bytes+j.need(it.a) > js.budget {
			js.journalDropped(it.id, 1, &js.warnedBudget, "the journal of unconfirmed claims is over its memory budget (Config.JournalBytes): claims answered are not journaled")
			return
		}
	}
	js.bytes += j.add(it.a)
}

// recheckJournals drains the inbox, prunes every journal (reading all of
// them if a loss is suspected), puts back the claims Redis lost, and
// publishes what each promotion holds. Journal goroutine only, once per
// re-check interval.
func (js *journals) recheckJournals(ctx context.Context) {
	js.drainInbox(ctx)
	if js.verify.Swap(false) {
		for _, j := range js.byID {
			j.verify, j.cursor = true, j.front()
		}
	}
	js.prunePass(ctx)
	budget := requeuePerPass
	for _, id := range js.journalIDs() {
		if j := js.byID[id]; len(j.retry) > 0 && budget > 0 {
			budget -= js.requeue(ctx, id, j, budget)
			js.drainInbox(ctx)
		}
	}
	claims := 0
	for id, j := range js.byID {
		if j.live == 0 {
			js.bytes -= j.bytes
			delete(js.byID, id)
		}
		claims += j.live
	}
	for id, h := range js.known.snapshot() {
		n := 0
		if j := js.byID[id]; j != nil {
			n = j.live
		}
		if int64(n) != h.journaled.Load() {
			h.journaled.Store(int64(n))
		}
	}
	if js.cfg.OnJournal != nil {
		js.cfg.OnJournal(claims, js.bytes)
	}
}

// journalIDs returns the promotions with a journal, sorted.
func (js *journals) journalIDs() []string {
	ids := make([]string, 0, len(js.byID))
	for id := range js.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// scan is one promotion's reading in a prune: from its confirmation front
// on, slices at a time while they find claims confirmed, or, verifying,
// to its end.
type scan struct {
	id     string
	j      *journal
	from   uint64
	want   int // slices of the next round trip
	verify bool
	done   bool
}

// prunePass reads, in round trips of at most sliceTrip slices and
// slicesPerPass slices in all, what Redis holds of the journaled claims
// (see the top of this file): it forgets the confirmed ones and marks the
// lost ones for requeue. It drains the inbox between round trips. Journal
// goroutine only.
func (js *journals) prunePass(ctx context.Context) {
	js.pruning = true
	defer func() { js.pruning = false }()
	var scans []*scan
	for _, id := range js.journalIDs() {
		j := js.byID[id]
		scans = append(scans, &scan{id: id, j: j, from: j.front(), want: 1})
		if j.verify {
			scans = append(scans, &scan{id: id, j: j, from: max(j.cursor, j.front()), want: sliceTrip, verify: true})
		}
	}
	type read struct {
		s  *scan
		cs []jclaim
	}
	for budget := slicesPerPass; budget > 0 && ctx.Err() == nil; {
		var qs []claim.Sighted
		var reads []read
		for _, s := range scans {
			for n := 0; !s.done && n < s.want && len(qs) < min(sliceTrip, budget); n++ {
				cs, next := s.j.slice(s.from, journalSlice)
				s.from = next
				if len(cs) == 0 {
					s.done = true
					break
				}
				q := claim.Sighted{ID: s.id, Ranks: make([]int64, len(cs)), Users: make([]string, len(cs))}
				for i, c := range cs {
					q.Ranks[i], q.Users[i] = c.rank, c.user
				}
				qs, reads = append(qs, q), append(reads, read{s: s, cs: cs})
			}
		}
		if len(qs) == 0 {
			break
		}
		budget -= len(qs)
		js.reads.Add(int64(len(qs)))
		seen, errs := js.gate.Sightings(ctx, qs)
		progress := map[*scan]bool{}
		for i, r := range reads {
			if errs[i] != nil || len(seen[i]) != len(r.cs) {
				js.log.Debug("cannot read the status of journaled claims; the next prune retries", "promotion", r.s.id, "err", errs[i])
				r.s.done = true
				continue
			}
			if js.sortSlice(r.s.j, r.cs, seen[i]) {
				progress[r.s] = true
			}
		}
		for _, s := range scans {
			if !s.verify && !s.done {
				if progress[s] {
					s.want = min(2*s.want, sliceTrip)
				} else {
					s.done = true // the confirmation front: later claims wait too
				}
			}
		}
		js.drainInbox(ctx)
	}
	for _, s := range scans {
		if s.verify {
			s.j.cursor = s.from
			s.j.verify = !s.done
		}
	}
}

// sortSlice forgets the confirmed claims of cs, given what Redis holds of
// them, and marks the lost ones for requeue (and the claims after the
// first of them for a verification). It reports whether any claim
// was confirmed or lost (the front moved).
func (js *journals) sortSlice(j *journal, cs []jclaim, seen []claim.Sighting) bool {
	moved := false
	for n, c := range cs {
		switch s := seen[n]; {
		case s.Status == "" || !s.Listed:
			if !j.retry[c.pos] && !j.verify {
				// Redis lost writes: the claims answered after this one
				// are read too, at the next prune.
				j.verify, j.cursor = true, c.pos+1
			}
			j.retry[c.pos] = true
			moved = true
		case s.Status == "p":
		default:
			// Issued, failed (a dead letter an admin sees), voided or
			// revoked.
			js.bytes -= j.forget(c.pos)
			delete(j.retry, c.pos)
			moved = true
		}
	}
	return moved
}

// requeue puts back at most limit of the claims of j Redis lost (see
// claim.Gate.Requeue) and returns how many it tried. A claim found lost on
// a promotion not rebuilt since asks the loop to rebuild it; a prune after
// it puts the claims back. Journal goroutine only.
func (js *journals) requeue(ctx context.Context, id string, j *journal, limit int) int {
	var pos []uint64
	var cs []claim.Unconfirmed
	for _, p := range slices.Sorted(maps.Keys(j.retry)) {
		a, ok := j.accepted(p)
		if !ok {
			delete(j.retry, p)
			continue
		}
		if len(cs) == limit {
			break
		}
		pos = append(pos, p)
		cs = append(cs, claim.Unconfirmed{Rank: a.rank, UserID: a.user, Slot: a.slot, AcceptedAt: time.UnixMilli(a.at),
			IdemKey: a.idem, RebuiltAfter: j.rebuiltAfter(p)})
	}
	requeued, collided := 0, 0
	for n, r := range js.gate.Requeue(ctx, id, cs) {
		p := pos[n]
		if r.Err != nil && ctx.Err() == nil {
			js.log.Warn("cannot put back claims Redis lost; the next re-check retries", "promotion", id, "err", r.Err)
		}
		switch r.Outcome {
		case claim.Requeued:
			requeued++
		case claim.RequeueCollided:
			collided++
		case claim.RequeueReranked:
			j.setRank(p, r.Rank)
		case claim.RequeuePresent:
		case claim.RequeueLost:
			// Every claim not yet put back waits for a rebuild that resumes
			// after now (Redis TIME of one node, the one that resumes it: so
			// the clock of the node that accepted the claims does not
			// matter).
			for _, q := range pos[n:] {
				j.after[q] = r.RebuiltAfter.UnixMilli()
			}
			js.asks.send(ask{kind: askJournalLost, id: id, asked: time.Now()})
			continue
		default:
			// Rebuilding, not found, not tried or failed: the next prune
			// tries again.
			continue
		}
		delete(j.retry, p)
	}
	if n := requeued + collided; n > 0 {
		js.log.Warn("requeued claims Redis lost that this instance had answered",
			"promotion", id, "requeued", n, "collided", collided)
		if js.cfg.OnRequeued != nil {
			js.cfg.OnRequeued(id, n)
		}
		js.wk.wakePool(id)
	}
	return len(cs)
}
