package promotion

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/hint"
)

// The sold-out memory: most claims of a drop arrive after its stock is
// gone, and each would cost a Redis round trip to learn what the last one
// learnt. So an instance remembers, per promotion, that the claim script
// answered sold_out or ended, for at most Config.SoldOutMemory, and answers
// the next claims from that memory:
//
//   - learnt from the script's own answer on this instance, or from a
//     hint (hint.SoldOut, hint.Ended) another instance published when it
//     learnt it; published once per learning, not per rejected claim;
//   - dropped on a changed hint about the promotion (a change, a unit put
//     back in stock; see memoryHint), at once and without a lock, and after
//     Config.SoldOutMemory at the latest: the hints are only hints, the
//     expiry is the guarantee;
//   - used only for claims without an Idempotency-Key (a retry must get
//     its original answer, which only Redis holds);
//   - ended is answered to everyone (the script checks the window before
//     the user); sold_out only to users this instance knows hold no unit of
//     the promotion: the script answers already_claimed to a holder first,
//     so a holder's claim, and one whose user the instance cannot rule out,
//     goes to Redis. On a promotion with a waiting room sold_out is not
//     answered from memory at all: the script checks the pass before the
//     stock, and only Redis knows whether a pass is live.
//
// Which users hold a unit is read from the promotion's users hash (user →
// units accepted) when the memory is learnt, with HSCAN, and kept as a
// sorted list of 64-bit hashes of the user ids (8 bytes a user): a user
// whose hash is in it may hold a unit and is asked of Redis; one whose hash
// is not holds none. The hash only grows (units are never taken back from
// it) and every claim that adds a user takes a unit, so the list read once
// stays right while the promotion is sold out; it is read again only when
// the rank counter or the hash's length moved since (two commands). Lists
// are kept for at most maxHolders users across promotions; past that, a
// promotion's sold_out is not answered from memory.
//
// One goroutine (run) owns the memory: it learns, reads the holders and
// publishes an immutable snapshot that claims read without a lock; a drop
// only sets a flag on the snapshot's entry and bumps an epoch, so a learning
// that began before the drop is discarded.

const (
	// maxHolders bounds the users whose hashes the instance keeps across
	// promotions (32 MiB).
	maxHolders = 1 << 22
	// holderPage is the COUNT of one HSCAN of a users hash.
	holderPage = 1000
	// learnBacklog bounds the learnings waiting for the memory's owner;
	// one that finds it full is dropped (the next answer teaches again).
	learnBacklog = 256
	// holderTimeout bounds one read of a promotion's holders.
	holderTimeout = 5 * time.Second
)

// Codes of the answers the memory gives, as metrics name them.
const (
	memorySoldOut = "sold_out"
	memoryEnded   = "ended"
)

// memo is what an instance remembers of one promotion. Immutable once
// published, but for dropped.
type memo struct {
	err    error // claim.ErrSoldOut or claim.ErrEnded
	code   string
	learnt time.Time // on Config.Now
	until  int64     // unix ns on Config.Now: answered before it only
	// holders are the users that may hold a unit; nil for ended, and for
	// a sold-out promotion whose holders are not known (sold_out is then
	// not answered).
	holders *holderSet
	// dropped is set by forget, from any goroutine.
	dropped atomic.Bool
}

// holderSet is the sorted hashes of a promotion's users hash, read when
// its rank counter and length were seq and n. Immutable.
type holderSet struct {
	seq, n int64
	hashes []uint64
}

// mayHold reports whether the user of hash x may hold a unit.
func (h *holderSet) mayHold(x uint64) bool {
	_, found := slices.BinarySearch(h.hashes, x)
	return found
}

// learning is an answer to remember.
type learning struct {
	id  string
	err error
	// epoch is soldMemory.epoch when the answer was asked for: a drop
	// since makes it stale.
	epoch uint64
	// fromHint: another instance learnt it; not published again.
	fromHint bool
}

// soldMemory is the Manager's sold-out memory (see above).
type soldMemory struct {
	known  *published
	gate   *claim.Gate
	client rueidis.Client
	hints  *hint.Bus // nil with Config.DisableHints
	log    *slog.Logger
	now    func() time.Time // Config.Now
	// onAnswer is Config.OnMemoryAnswer.
	onAnswer func(promotionID, code string)
	ttl      time.Duration // ≤ 0: off
	seed     maphash.Seed
	// snap is the published memory by promotion id: written by run only,
	// read by anyone.
	snap atomic.Pointer[map[string]*memo]
	// epoch counts drops; written by forget, read by anyone.
	epoch atomic.Uint64
	// in carries learnings to run; bounded, senders never block.
	in chan learning

	// Owned by run: the holder sets read, by promotion, and their total
	// size.
	sets  map[string]*holderSet
	total int
}

func newSoldMemory(known *published, gate *claim.Gate, client rueidis.Client, hints *hint.Bus, cfg Config) *soldMemory {
	s := &soldMemory{known: known, gate: gate, client: client, hints: hints, log: cfg.Logger, now: cfg.Now,
		onAnswer: cfg.OnMemoryAnswer, ttl: cfg.SoldOutMemory, seed: maphash.MakeSeed(),
		in: make(chan learning, learnBacklog), sets: make(map[string]*holderSet)}
	s.snap.Store(&map[string]*memo{})
	return s
}

// hash is the user id's hash in holder sets.
func (sm *soldMemory) hash(user string) uint64 { return maphash.String(sm.seed, user) }

// remembered answers a claim of userID in promotion id from memory, with
// the error the claim script would answer, or nil when the claim must go
// to Redis. room says the promotion has a waiting room (or may have: it
// is not known yet).
func (sm *soldMemory) remembered(id, userID string, room bool) error {
	if sm.ttl <= 0 {
		return nil
	}
	e := (*sm.snap.Load())[id]
	if e == nil || e.dropped.Load() || sm.now().UnixNano() >= e.until {
		return nil
	}
	if e.err == claim.ErrSoldOut && (room || e.holders == nil || e.holders.mayHold(sm.hash(userID))) {
		return nil
	}
	if sm.onAnswer != nil {
		sm.onAnswer(id, e.code)
	}
	return e.err
}

// learn hands the claim script's answer err for promotion id to the
// memory, if it is one to remember; epoch is sm.epoch read before the
// script ran. Never blocks.
func (sm *soldMemory) learn(id string, err error, epoch uint64) {
	if sm.ttl <= 0 || (err != claim.ErrSoldOut && err != claim.ErrEnded) {
		return
	}
	if e := (*sm.snap.Load())[id]; e != nil && e.err == err && !e.dropped.Load() &&
		sm.now().Sub(e.learnt) < sm.ttl/2 {
		return // learnt a moment ago: the burst of answers in flight teaches nothing new
	}
	select {
	case sm.in <- learning{id: id, err: err, epoch: epoch}:
	default:
	}
}

// memoryHint takes a hint off the bus: a sold-out or ended hint teaches
// the memory, a work hint is ignored, and any other kind (changed, and
// kinds this instance does not know) drops what the memory holds of the
// promotion. Never blocks.
//
// A work hint says the promotion's stream has new entries: claims were
// accepted (which only takes stock) or replayed (which leaves it alone).
// Every step that puts a unit back — a void, a revoke that returns it, a
// stock raise, an end moved later — tells the instances with a changed
// hint. Dropping the memory on work hints would drop it on the hints of
// the very claims that sold the promotion out, which arrive after it.
func (sm *soldMemory) memoryHint(h hint.Hint) {
	var err error
	switch h.Kind {
	case hint.Work:
		return
	case hint.SoldOut:
		err = claim.ErrSoldOut
	case hint.Ended:
		err = claim.ErrEnded
	default:
		sm.forgetSoldOut(h.Key)
		return
	}
	if sm.ttl <= 0 {
		return
	}
	if e := (*sm.snap.Load())[h.Key]; e != nil && e.err == err && !e.dropped.Load() &&
		sm.now().Sub(e.learnt) < sm.ttl/2 {
		return // this instance's own hint, or one it just had
	}
	select {
	case sm.in <- learning{id: h.Key, err: err, epoch: sm.epoch.Load(), fromHint: true}:
	default:
	}
}

// forgetSoldOut drops what the memory holds of promotion id, at once:
// every later claim of it goes to Redis until the memory learns again from
// an answer given after this. Never blocks.
func (sm *soldMemory) forgetSoldOut(id string) {
	sm.epoch.Add(1)
	if e := (*sm.snap.Load())[id]; e != nil {
		e.dropped.Store(true)
	}
}

// runSoldMemory owns the memory until ctx ends: it learns what claims and
// hints hand it, and drops expired entries and the holders of promotions
// no longer watched.
func (sm *soldMemory) runSoldMemory(ctx context.Context) {
	t := time.NewTicker(max(sm.ttl, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case l := <-sm.in:
			sm.learnNow(ctx, l)
		case <-t.C:
			sm.pruneSoldMemory()
		}
	}
}

// learnNow remembers l, unless a drop came since its answer or the
// promotion is not one this instance watches. Owner only.
func (sm *soldMemory) learnNow(ctx context.Context, l learning) {
	if sm.epoch.Load() != l.epoch {
		return
	}
	h := sm.known.lookup(l.id)
	if h == nil {
		// Not watched here yet (created elsewhere a moment ago): the
		// instances that watch it may remember it.
		if !l.fromHint {
			sm.tellSoldOut(ctx, l)
		}
		return
	}
	now := sm.now()
	if e := (*sm.snap.Load())[l.id]; e != nil && e.err == l.err && !e.dropped.Load() && now.Sub(e.learnt) < sm.ttl/2 {
		return
	}
	// The memory lasts from when the answer was known, however long the
	// holders take to read.
	e := &memo{err: l.err, code: memoryEnded, learnt: now, until: now.Add(sm.ttl).UnixNano()}
	if l.err == claim.ErrSoldOut {
		e.code = memorySoldOut
		if !h.room {
			hctx, cancel := context.WithTimeout(ctx, holderTimeout)
			hs, err := sm.holders(hctx, l.id)
			cancel()
			if err != nil && ctx.Err() == nil {
				sm.log.Debug("sold-out memory: holders not read; sold_out is answered by Redis", "promotion", l.id, "err", err)
			}
			e.holders = hs
		}
	}
	old := *sm.snap.Load()
	next := make(map[string]*memo, len(old)+1)
	for id, o := range old {
		if !o.dropped.Load() {
			next[id] = o
		}
	}
	next[l.id] = e
	sm.snap.Store(&next)
	if sm.epoch.Load() != l.epoch {
		// A drop came while this was learnt; it may have looked at the
		// snapshot before this one was stored.
		e.dropped.Store(true)
		return
	}
	if !l.fromHint {
		sm.tellSoldOut(ctx, l)
	}
}

// tellSoldOut publishes what l learnt to the other instances. Owner only.
func (sm *soldMemory) tellSoldOut(ctx context.Context, l learning) {
	if sm.hints == nil {
		return
	}
	kind := hint.SoldOut
	if l.err == claim.ErrEnded {
		kind = hint.Ended
	}
	pctx, cancel := context.WithTimeout(ctx, hintTimeout)
	defer cancel()
	if err := sm.hints.Publish(pctx, l.id, kind); err != nil && ctx.Err() == nil {
		sm.log.Debug("cannot tell other instances of a sold-out promotion", "promotion", l.id, "err", err)
	}
}

// errTooManyHolders means the holders of a promotion would pass
// maxHolders.
var errTooManyHolders = errors.New("more holders than the memory keeps")

// holders returns the hashes of the users of promotion id that may hold a
// unit: those its users hash lists. It reads the hash again only if its
// rank counter or length moved since the last read. Owner only.
func (sm *soldMemory) holders(ctx context.Context, id string) (*holderSet, error) {
	seq, n, err := sm.holderVersion(ctx, id)
	if err != nil {
		return nil, err
	}
	if hs := sm.sets[id]; hs != nil && hs.seq == seq && hs.n == n {
		return hs, nil
	}
	if hs := sm.sets[id]; hs != nil {
		sm.total -= len(hs.hashes)
		delete(sm.sets, id)
	}
	if sm.total+int(n) > maxHolders {
		return nil, errTooManyHolders
	}
	k := sm.gate.Keys(id)
	hashes := make([]uint64, 0, n)
	cursor := uint64(0)
	for {
		e, err := sm.client.Do(ctx, sm.client.B().Hscan().Key(k.ByUser()).Cursor(cursor).Count(holderPage).Build()).AsScanEntry()
		if err != nil {
			return nil, fmt.Errorf("read holders of %s: %w", id, err)
		}
		for i := 0; i+1 < len(e.Elements); i += 2 {
			hashes = append(hashes, sm.hash(e.Elements[i]))
		}
		if cursor = e.Cursor; cursor == 0 {
			break
		}
		if len(hashes) > maxHolders-sm.total {
			return nil, errTooManyHolders
		}
	}
	seq2, n2, err := sm.holderVersion(ctx, id)
	if err != nil {
		return nil, err
	}
	if seq2 != seq || n2 != n {
		return nil, fmt.Errorf("read holders of %s: claims were taken meanwhile", id)
	}
	slices.Sort(hashes)
	hs := &holderSet{seq: seq, n: n, hashes: slices.Compact(hashes)}
	sm.sets[id] = hs
	sm.total += len(hs.hashes)
	return hs, nil
}

// holderVersion reads promotion id's rank counter and the length of its
// byuser hash (one field per user with a claim, in either layout), in one
// round trip (one Cluster slot).
func (sm *soldMemory) holderVersion(ctx context.Context, id string) (seq, n int64, err error) {
	k := sm.gate.Keys(id)
	res := sm.client.DoMulti(ctx,
		sm.client.B().Get().Key(k.Seq()).Build(),
		sm.client.B().Hlen().Key(k.ByUser()).Build())
	if seq, err = res[0].AsInt64(); rueidis.IsRedisNil(err) {
		seq, err = 0, nil
	}
	if err == nil {
		n, err = res[1].AsInt64()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read holders of %s: %w", id, err)
	}
	return seq, n, nil
}

// pruneSoldMemory drops expired and dropped entries, and the holders of
// promotions this instance no longer watches. Owner only.
func (sm *soldMemory) pruneSoldMemory() {
	known := sm.known.snapshot()
	now := sm.now().UnixNano()
	old := *sm.snap.Load()
	next := make(map[string]*memo, len(old))
	for id, e := range old {
		if !e.dropped.Load() && now < e.until && known[id] != nil {
			next[id] = e
		}
	}
	if len(next) != len(old) {
		sm.snap.Store(&next)
	}
	for id, hs := range sm.sets {
		if known[id] == nil {
			sm.total -= len(hs.hashes)
			delete(sm.sets, id)
		}
	}
}
