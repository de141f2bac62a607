package promotion

import (
	"sync"
	"sync/atomic"
)

// Fences: a loss of Redis's history is caught before it can collide.
//
// Each instance remembers, per promotion, the highest rank it knows to be
// taken: the ranks it answered, the ranks its issuers confirmed and the
// database's highest rank read by every re-check. Every claim and grant
// passes that rank to the gate's script as a fence; a rank counter below it
// means Redis lost writes (an append-only file that had not reached the
// disk, a restore from an older snapshot, a failover to a lagging replica),
// and the script marks the promotion rebuilding instead of handing a known
// rank out again. The request is answered unavailable and the Manager's own
// goroutine rebuilds the promotion, raising its counter to at least the
// fence. A rank answered by another instance and lost before anyone
// confirmed it is the one thing no fence sees; the issuer's collision
// handling (issuer.go) makes that harmless.

// fences holds the per-promotion fences of a Manager. The ranks are atomics
// because every claim reads its promotion's and raises it; the map only
// grows by a promotion's first use and shrinks when it drains.
type fences struct {
	m sync.Map // promotion id → *atomic.Int64
}

func (f *fences) of(id string) *atomic.Int64 {
	if v, ok := f.m.Load(id); ok {
		return v.(*atomic.Int64)
	}
	v, _ := f.m.LoadOrStore(id, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// get returns the highest rank known to be taken in promotion id.
func (f *fences) get(id string) int64 { return f.of(id).Load() }

// raise records that rank is taken in promotion id.
func (f *fences) raise(id string, rank int64) {
	r := f.of(id)
	for {
		cur := r.Load()
		if rank <= cur || r.CompareAndSwap(cur, rank) {
			return
		}
	}
}

// forget drops the fence of a drained promotion.
func (f *fences) forget(id string) { f.m.Delete(id) }

// knownFloor is the highest rank known to be taken in promotion id: the
// database's floor dbFloor or this instance's fence, whichever is higher
// (the fence is raised to it).
func (f *fences) knownFloor(id string, dbFloor int64) int64 {
	f.raise(id, dbFloor)
	return f.get(id)
}
