package promotion

import (
	"sort"
	"time"
	"unsafe"
)

// The journal's memory: compact entries in blocks, sized by bytes.
//
// One claim costs a jentry (24 bytes: rank, acceptance time, the offset of
// its strings, slot and their lengths) plus its user id and
// Idempotency-Key, copied into its block's arena. A journal is a list of
// blocks in the order the claims were answered; an entry seen confirmed is
// marked forgotten (at = 0) and its block is freed once every entry of it
// is. Positions (a claim's index in the journal's history) never move, so a
// prune or a verification can stop anywhere and resume.

const (
	// entryBytes is the fixed size of one journaled claim.
	entryBytes = int64(unsafe.Sizeof(jentry{}))
	// blockEntries bounds the claims of one block.
	blockEntries = 1024
	// blockOverhead is what one block costs beyond its entries and arena.
	blockOverhead = int64(unsafe.Sizeof(jblock{})) + 16
	// maxJournaledLen bounds a user id or an Idempotency-Key the journal
	// keeps (the HTTP API allows 64 bytes for each).
	maxJournaledLen = 255
)

// accepted is a claim this instance answered 202 and has not seen
// confirmed.
type accepted struct {
	rank int64
	user string
	slot int
	at   int64  // Redis TIME at acceptance, unix ms
	idem string // Idempotency-Key, or ""
}

// jentry is one journaled claim.
type jentry struct {
	rank int64
	at   int64  // Redis TIME of acceptance, unix ms; 0 once forgotten
	off  uint32 // offset of the user id, then the key, in the block's arena
	slot uint16
	ulen uint8
	klen uint8
}

// jblock is a run of journaled claims.
type jblock struct {
	first uint64 // position of es[0]
	es    []jentry
	arena []byte
	live  int // entries not forgotten
}

func (b *jblock) cost() int64 {
	return blockOverhead + int64(cap(b.es))*entryBytes + int64(cap(b.arena))
}

// jclaim is one journaled claim as the prune and the requeue read it.
type jclaim struct {
	pos  uint64
	rank int64
	user string
}

// journal is one promotion's claims answered and not yet seen confirmed,
// in the order they were answered. Owned by the journal goroutine.
type journal struct {
	blocks []*jblock
	next   uint64 // position of the next claim added
	live   int    // claims not forgotten
	bytes  int64  // memory of the blocks
	// after holds, for claims found lost before a rebuild, the Redis TIME
	// (unix ms) a rebuild must follow before they are put back.
	after map[uint64]int64
	// retry holds the positions of claims found lost and not yet put back.
	retry map[uint64]bool
	// verify asks the next prune to read every claim, not only those at the
	// confirmation front, from position cursor on.
	verify bool
	cursor uint64
}

// First sizes of a block: it doubles as claims come, up to blockEntries
// claims (and its arena as their strings need).
const (
	firstEntries = 8
	firstArena   = 256
)

// fits reports whether a's strings can be kept.
func (a accepted) fits() bool {
	return len(a.user) <= maxJournaledLen && len(a.idem) <= maxJournaledLen && a.slot >= 0 && a.slot < 1<<16
}

// tail returns the block the next claim goes to, nil if a new one is
// needed.
func (j *journal) tail() *jblock {
	if n := len(j.blocks); n > 0 && len(j.blocks[n-1].es) < blockEntries {
		return j.blocks[n-1]
	}
	return nil
}

// need returns the bytes adding a would take: a new block, or room the
// tail block must grow by.
func (j *journal) need(a accepted) int64 {
	strs := len(a.user) + len(a.idem)
	b := j.tail()
	if b == nil {
		return blockOverhead + firstEntries*entryBytes + int64(max(firstArena, strs))
	}
	var n int64
	if len(b.es) == cap(b.es) {
		n += int64(cap(b.es)) * entryBytes
	}
	if len(b.arena)+strs > cap(b.arena) {
		n += int64(max(cap(b.arena), strs))
	}
	return n
}

// add appends a claim (which must fit) and returns the bytes the journal
// grew by.
func (j *journal) add(a accepted) int64 {
	strs := len(a.user) + len(a.idem)
	b := j.tail()
	var grew int64
	if b == nil {
		b = &jblock{first: j.next, es: make([]jentry, 0, firstEntries), arena: make([]byte, 0, max(firstArena, strs))}
		j.blocks = append(j.blocks, b)
		grew = b.cost()
	}
	if len(b.es) == cap(b.es) {
		es := make([]jentry, len(b.es), min(2*cap(b.es), blockEntries))
		copy(es, b.es)
		grew += int64(cap(es)-cap(b.es)) * entryBytes
		b.es = es
	}
	if len(b.arena)+strs > cap(b.arena) {
		ar := make([]byte, len(b.arena), cap(b.arena)+max(cap(b.arena), strs))
		copy(ar, b.arena)
		grew += int64(cap(ar) - cap(b.arena))
		b.arena = ar
	}
	b.es = append(b.es, jentry{rank: a.rank, at: max(a.at, 1), off: uint32(len(b.arena)), slot: uint16(a.slot),
		ulen: uint8(len(a.user)), klen: uint8(len(a.idem))})
	b.arena = append(append(b.arena, a.user...), a.idem...)
	b.live++
	j.live++
	j.next++
	j.bytes += grew
	return grew
}

// block returns the block holding position pos and its index, or nil.
func (j *journal) block(pos uint64) (int, *jblock) {
	i := sort.Search(len(j.blocks), func(i int) bool { return j.blocks[i].first+uint64(len(j.blocks[i].es)) > pos })
	if i == len(j.blocks) || pos < j.blocks[i].first {
		return i, nil
	}
	return i, j.blocks[i]
}

// entry returns the claim at pos, or nil if it was forgotten.
func (j *journal) entry(pos uint64) (*jblock, *jentry) {
	_, b := j.block(pos)
	if b == nil {
		return nil, nil
	}
	e := &b.es[pos-b.first]
	if e.at == 0 {
		return nil, nil
	}
	return b, e
}

// forget drops the claim at pos; it returns the bytes freed.
func (j *journal) forget(pos uint64) int64 {
	i, b := j.block(pos)
	if b == nil || b.es[pos-b.first].at == 0 {
		return 0
	}
	b.es[pos-b.first].at = 0
	b.live--
	j.live--
	delete(j.after, pos)
	if b.live > 0 {
		return 0
	}
	freed := b.cost()
	j.blocks = append(j.blocks[:i], j.blocks[i+1:]...)
	j.bytes -= freed
	return freed
}

// front is the position of the oldest claim not forgotten (j.next if none).
func (j *journal) front() uint64 {
	for _, b := range j.blocks {
		if b.live == 0 {
			continue
		}
		for n, e := range b.es {
			if e.at != 0 {
				return b.first + uint64(n)
			}
		}
	}
	return j.next
}

// slice returns up to n claims not forgotten from position from on, and
// the position to read on from (j.next once the end was reached).
func (j *journal) slice(from uint64, n int) ([]jclaim, uint64) {
	out := make([]jclaim, 0, n)
	next := from
	i, _ := j.block(from)
	for ; i < len(j.blocks) && len(out) < n; i++ {
		b := j.blocks[i]
		k := 0
		if next > b.first {
			k = int(next - b.first)
		}
		for ; k < len(b.es) && len(out) < n; k++ {
			if e := &b.es[k]; e.at != 0 {
				out = append(out, jclaim{pos: b.first + uint64(k), rank: e.rank, user: string(b.arena[e.off : e.off+uint32(e.ulen)])})
			}
		}
		next = b.first + uint64(k)
	}
	if len(out) < n {
		next = j.next
	}
	return out, next
}

// accepted returns the claim at pos as it was answered, or false if it was
// forgotten.
func (j *journal) accepted(pos uint64) (accepted, bool) {
	b, e := j.entry(pos)
	if e == nil {
		return accepted{}, false
	}
	u := e.off + uint32(e.ulen)
	return accepted{rank: e.rank, slot: int(e.slot), at: e.at,
		user: string(b.arena[e.off:u]), idem: string(b.arena[u : u+uint32(e.klen)])}, true
}

// setRank records that the claim at pos was given a new rank.
func (j *journal) setRank(pos uint64, rank int64) {
	if _, e := j.entry(pos); e != nil {
		e.rank = rank
	}
}

// rebuiltAfter is the time a rebuild must follow before the claim at pos
// is put back (zero: its acceptance).
func (j *journal) rebuiltAfter(pos uint64) time.Time {
	if ms, ok := j.after[pos]; ok {
		return time.UnixMilli(ms)
	}
	return time.Time{}
}
