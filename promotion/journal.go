package promotion

import (
	"context"
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
// and knows it. So every Manager keeps, per promotion, a bounded journal of
// the claims it answered and has not seen confirmed: rank, user, slot,
// Idempotency-Key and acceptance time.
//
//   - The claim path appends to its promotion's inbox, a bounded channel on
//     the handle, without blocking and without a lock; an append that finds
//     the inbox full is dropped and counted. It then queues the handle for
//     the loop (at most once at a time, as wakes do).
//   - The Manager's loop owns the journals: it moves inboxes into them, and
//     on every re-check reads, in one pipelined round trip (a read-only
//     script per thousand claims, of either layout), the status of
//     every journaled rank and the list of every journaled user. A claim
//     whose status is issued, failed or voided, with its rank in its user's
//     list, is confirmed (or visibly dead-lettered) and forgotten; one still
//     pending stays. A claim with no status, or whose rank its user's list
//     lacks, was lost by Redis.
//   - A lost claim is put back by claim.Gate.Requeue, under its original
//     rank, slot and claim id — but only on a promotion rebuilt from the
//     database after the loss, so that what the database holds is merged
//     first: the first attempt finds it not rebuilt since, the loop starts
//     the rebuild, and a re-check after it puts the claims back. A rank another claim took meanwhile (the window no fence sees)
//     is put back as a collision, and the issuer re-ranks one of the two.
//
// A journal holds at most Config.JournalSize claims; past that the oldest
// (the most likely to be confirmed already) are dropped and counted
// (Config.OnJournalDropped), with one warning per process. What the journal
// cannot put back: claims answered by an instance that died before Redis's
// loss was repaired, claims it dropped, and grants (their uploads are
// idempotent: upload again).

// DefaultJournalSize is the default of Config.JournalSize.
const DefaultJournalSize = 10_000

const (
	// inboxSize bounds each promotion's claims waiting for the loop to move
	// them into its journal (allocated on the promotion's first claim on
	// this instance).
	inboxSize = 1024
	// journalChunk bounds the claims of one read of a prune.
	journalChunk = 1000
)

// accepted is a claim this instance answered 202 and has not seen
// confirmed.
type accepted struct {
	rank int64
	user string
	slot int
	at   time.Time // Redis TIME at acceptance
	idem string    // Idempotency-Key, or ""
	// after is the Redis TIME a rebuild must be later than for the claim to
	// be put back (zero: at); set when it was found lost before a rebuild.
	after time.Time
}

// inbox is the claim path's side of one promotion's journal: a bounded
// channel, made on first use, that only the loop reads.
type inbox struct {
	ch      atomic.Pointer[chan accepted]
	queued  atomic.Bool  // the handle is on journals.wakes, or about to be
	dropped atomic.Int64 // appends dropped because ch was full, not yet reported
}

// channel returns the inbox's channel, making it on first use.
func (in *inbox) channel() chan accepted {
	if p := in.ch.Load(); p != nil {
		return *p
	}
	ch := make(chan accepted, inboxSize)
	if in.ch.CompareAndSwap(nil, &ch) {
		return ch
	}
	return *in.ch.Load()
}

// journal is one promotion's unconfirmed claims, oldest first. Loop only.
type journal struct {
	es         []accepted
	lastPruned time.Time // when a full journal was last pruned early
}

// journals is the Manager's state of the journals.
type journals struct {
	size int
	// wakes carries handles whose inbox has claims to the loop; bounded,
	// senders never block (see inbox.queued).
	wakes chan *handle
	// warned is set by the first dropped claim, which is logged.
	warned atomic.Bool
	// byID is owned by the loop.
	byID map[string]*journal
}

func newJournals(size int) journals {
	return journals{size: size, wakes: make(chan *handle, wakeBacklog), byID: make(map[string]*journal)}
}

// journalAccepted records that this instance answered res to userID in
// promotion id. It never blocks and takes no lock: called on the claim
// path.
func (m *Manager) journalAccepted(id, userID, idemKey string, res claim.Result) {
	a := accepted{rank: res.Rank, user: userID, slot: res.Slot, at: res.AcceptedAt, idem: idemKey}
	h := (*m.known.Load())[id]
	if h == nil {
		// Not published yet: the loop is asked to open it (wakePool), and
		// takes the claim the same way.
		if !m.ask(ask{kind: askJournal, id: id, asked: time.Now(), accepted: a}) {
			m.journalDropped(id, 1)
		}
		return
	}
	select {
	case h.in.channel() <- a:
	default:
		h.in.dropped.Add(1)
	}
	if !h.in.queued.CompareAndSwap(false, true) {
		return // queued already and not yet drained: that drain takes this claim
	}
	select {
	case m.jr.wakes <- h:
	default:
		h.in.queued.Store(false) // the next re-check drains it
	}
}

// journalDropped counts n claims of promotion id that the journal could not
// keep. Safe from any goroutine.
func (m *Manager) journalDropped(id string, n int64) {
	if m.jr.warned.CompareAndSwap(false, true) {
		m.log.Warn("journal of unconfirmed claims full: claims are dropped from it, oldest first, and could not be put back if Redis lost them now (further drops are only counted)",
			"promotion", id, "dropped", n, "journal_size", m.jr.size)
	}
	if m.cfg.OnJournalDropped != nil {
		m.cfg.OnJournalDropped(id, int(n))
	}
}

// drainInbox moves the claims queued in h's inbox into its journal. Loop
// only.
func (m *Manager) drainInbox(ctx context.Context, h *handle) {
	h.in.queued.Store(false)
	if n := h.in.dropped.Swap(0); n > 0 {
		m.journalDropped(h.id, n)
	}
	p := h.in.ch.Load()
	if p == nil {
		return
	}
	// Only what is queued now: claims keep coming, the loop has more to do.
	for n := len(*p); n > 0; n-- {
		m.journalAdd(ctx, h.id, <-*p)
	}
}

// journalAdd appends a to promotion id's journal. A full journal is pruned
// first (at most a few times per re-check interval); if it is still full,
// its oldest claim is dropped. Loop only.
func (m *Manager) journalAdd(ctx context.Context, id string, a accepted) {
	j := m.jr.byID[id]
	if j == nil {
		j = &journal{}
		m.jr.byID[id] = j
	}
	if len(j.es) >= m.jr.size {
		if now := time.Now(); now.Sub(j.lastPruned) >= m.cfg.RecheckInterval/8 {
			j.lastPruned = now
			m.pruneJournals(ctx, []string{id}, false)
		}
		if over := len(j.es) - m.jr.size + 1; over > 0 {
			j.es = j.es[over:]
			m.journalDropped(id, int64(over))
		}
	}
	j.es = append(j.es, a)
}

// recheckJournals drains every inbox, forgets the confirmed claims of every
// journal and puts back those Redis lost. Loop only, once per re-check.
func (m *Manager) recheckJournals(ctx context.Context) {
	for _, h := range m.handles {
		m.drainInbox(ctx, h)
	}
	ids := make([]string, 0, len(m.jr.byID))
	for id, j := range m.jr.byID {
		if len(j.es) == 0 {
			delete(m.jr.byID, id)
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	m.pruneJournals(ctx, ids, true)
}

// pruneJournals reads, in one pipelined round trip, the status of every
// rank and the list of every user the journals of ids hold (one
// claim.Gate.Sightings query per journalChunk claims); it forgets the
// confirmed claims and, with requeue, puts back those Redis lost. Loop only.
func (m *Manager) pruneJournals(ctx context.Context, ids []string, requeue bool) {
	type span struct{ from, to int } // the queries of one journal
	var qs []claim.Sighted
	spans := make([]span, len(ids))
	for i, id := range ids {
		es := m.jr.byID[id].es
		spans[i].from = len(qs)
		for start := 0; start < len(es); start += journalChunk {
			chunk := es[start:min(start+journalChunk, len(es))]
			q := claim.Sighted{ID: id, Ranks: make([]int64, len(chunk)), Users: make([]string, len(chunk))}
			for n, a := range chunk {
				q.Ranks[n], q.Users[n] = a.rank, a.user
			}
			qs = append(qs, q)
		}
		spans[i].to = len(qs)
	}
	if len(qs) == 0 {
		return
	}
	seen, errs := m.gate.Sightings(ctx, qs)
	for i, id := range ids {
		j := m.jr.byID[id]
		lost := m.sortJournal(id, j, seen[spans[i].from:spans[i].to], errs[spans[i].from:spans[i].to])
		if requeue && len(lost) > 0 {
			m.requeue(ctx, id, j, lost)
		}
	}
}

// sortJournal forgets the confirmed claims of j, given what Redis holds of
// them (per chunk of journalChunk claims, with the chunk's error), and
// returns the indexes in j.es of the claims Redis lost. A chunk whose read
// failed is kept as it is.
func (m *Manager) sortJournal(id string, j *journal, seen [][]claim.Sighting, errs []error) (lost []int) {
	kept := j.es[:0]
	for c := range seen {
		chunk := j.es[c*journalChunk : min((c+1)*journalChunk, len(j.es))]
		if errs[c] != nil || len(seen[c]) != len(chunk) {
			m.log.Debug("cannot read the status of journaled claims; the next re-check retries",
				"promotion", id, "err", errs[c])
			kept = append(kept, chunk...)
			continue
		}
		for n, a := range chunk {
			s := seen[c][n]
			switch {
			case s.Status == "" || !s.Listed:
				lost = append(lost, len(kept))
				kept = append(kept, a)
			case s.Status == "p":
				kept = append(kept, a)
			default:
				// Issued, failed (a dead letter an admin sees) or voided.
			}
		}
	}
	clear(j.es[len(kept):])
	j.es = kept
	return lost
}

// requeue puts back the claims of j at the indexes lost (see
// claim.Gate.Requeue). A claim found lost on a promotion not rebuilt since
// starts its rebuild, and a re-check after it puts the claims back. Loop
// only.
func (m *Manager) requeue(ctx context.Context, id string, j *journal, lost []int) {
	cs := make([]claim.Unconfirmed, len(lost))
	for n, i := range lost {
		a := j.es[i]
		cs[n] = claim.Unconfirmed{Rank: a.rank, UserID: a.user, Slot: a.slot, AcceptedAt: a.at, IdemKey: a.idem, RebuiltAfter: a.after}
	}
	requeued, collided := 0, 0
	for n, r := range m.gate.Requeue(ctx, id, cs) {
		a := &j.es[lost[n]]
		switch r.Outcome {
		case claim.Requeued:
			requeued++
		case claim.RequeueCollided:
			collided++
		case claim.RequeueReranked:
			a.rank = r.Rank
		case claim.RequeueLost:
			// Every claim not yet put back waits for a rebuild that resumes
			// after now (Redis TIME of one node, the one that resumes it: so
			// the clock of the node that accepted the claims does not
			// matter).
			for _, i := range lost[n:] {
				j.es[i].after = r.RebuiltAfter
			}
			m.rebuildForJournal(id)
		}
		if r.Err != nil && ctx.Err() == nil {
			m.log.Warn("cannot put back claims Redis lost; the next re-check retries", "promotion", id, "err", r.Err)
		}
	}
	if n := requeued + collided; n > 0 {
		m.log.Warn("requeued claims Redis lost that this instance had answered",
			"promotion", id, "requeued", n, "collided", collided)
		if m.cfg.OnRequeued != nil {
			m.cfg.OnRequeued(id, n)
		}
		m.wakePool(id)
	}
}

// rebuildForJournal starts the rebuild of promotion id, whose claims this
// instance answered Redis lost, unless one runs here already. Loop only.
func (m *Manager) rebuildForJournal(id string) {
	if m.rb.busy(id) {
		return
	}
	m.log.Warn("Redis lost writes: claims this instance answered are missing; pausing claims to rebuild, then putting them back",
		"promotion", id)
	if p, ok := m.active[id]; ok {
		m.startRebuild(p, reasonJournal, false)
		return
	}
	m.startRebuildWith(id, func(ctx context.Context) (Promotion, error) { return m.load(ctx, id) }, reasonJournal, false)
}
