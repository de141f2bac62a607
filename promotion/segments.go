package promotion

import (
	"context"
	"fmt"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// Segments (see claim.Segments and docs/architecture.md): a promotion with
// Segments > 1 keeps its stock in that many parts, each under its own hash
// tag with its own work stream. The Manager runs one confirmation pool per
// segment, each with its own handle in the loop's set (segment 0's is the
// promotion's own; segment k's is keyed by its tag, which no promotion id
// can be, '#' being no id character). Every re-check settles the transfers
// of stock between segments left in flight, drains the promotion only when
// every segment ended and the database holds every rank they handed out,
// and leaves the rebuild from the database to promotions of one segment
// (docs/durability.md says what that leaves uncovered).

// segmented reports whether p has more than one segment.
func (p Promotion) segmented() bool { return p.Segments > 1 }

// layout is p's segment layout.
func (p Promotion) layout() claim.Segments { return claim.SegmentsOf(p.ID, p.Segments) }

// errSegmented refuses a change the segments of a promotion do not take
// yet (Patch, Revoke, a requested Rebuild).
func errSegmented(what string) error {
	return invalid("segments", "%s is not supported for a promotion with more than one segment", what)
}

// segmentOps reads, ends, closes and voids a promotion over all its
// segments (one segment for a promotion without any).
type segmentOps struct {
	gate  *claim.Gate
	st    store.Store
	known *published
}

// segmentsFor returns the segment layout of promotion id: the published
// handle's, else the database's definition's.
func (so *segmentOps) segmentsFor(ctx context.Context, id string) (claim.Segments, error) {
	if h := so.known.lookup(id); h != nil {
		return h.segs, nil
	}
	p, err := load(ctx, so.st, id)
	if err != nil {
		return claim.Segments{}, err
	}
	return p.layout(), nil
}

// state reads p's live Redis state: its own, or the sum of its segments'
// with the units in flight between them counted in its stock.
func (so *segmentOps) state(ctx context.Context, p Promotion) (claim.State, error) {
	if !p.segmented() {
		return so.gate.State(ctx, p.ID)
	}
	st, err := so.gate.SegmentStates(ctx, p.layout())
	if err != nil {
		return claim.State{}, err
	}
	return claim.SegmentsState(st), nil
}

// ended decides whether p has ended (see claim.Gate.Ended), over all its
// segments, and returns the ranks it handed out.
func (so *segmentOps) ended(ctx context.Context, p Promotion) (bool, int64, error) {
	if !p.segmented() {
		return so.gate.Ended(ctx, p.ID)
	}
	return so.gate.EndedSegments(ctx, p.layout())
}

// closeOnGate closes p in Redis: every segment of it.
func (so *segmentOps) closeOnGate(ctx context.Context, p Promotion) error {
	if !p.segmented() {
		return so.gate.Close(ctx, p.ID)
	}
	return so.gate.CloseSegments(ctx, p.layout())
}

// segmentKeys lists the Redis keys of p's segments 1..N-1, for retirement.
func (so *segmentOps) segmentKeys(p Promotion) []string {
	var out []string
	for i, tag := range p.layout().Tags() {
		k := so.gate.Keys(tag)
		out = append(out, k.Transfers(), k.Received())
		if i > 0 {
			out = append(out, k.State()...)
			out = append(out, stream.FailuresKey(k.Stream(), claim.Group))
		}
	}
	return out
}

// voidRanks voids ranks of promotion id in the segments that handed
// them out (see claim.Gate.Void): how many units went back, and the ranks
// Redis holds no status for.
func (so *segmentOps) voidRanks(ctx context.Context, id string, ranks []int64) (int64, []int64, error) {
	segs, err := so.segmentsFor(ctx, id)
	if err != nil {
		return 0, nil, err
	}
	by := make(map[string][]int64)
	for _, r := range ranks {
		by[segs.TagOfRank(r)] = append(by[segs.TagOfRank(r)], r)
	}
	var voided int64
	var unknown []int64
	for tag, rs := range by {
		v, u, err := so.gate.Void(ctx, tag, rs...)
		if err != nil {
			return 0, nil, fmt.Errorf("return %d units of %s to stock: %w", len(rs), id, err)
		}
		voided += v
		unknown = append(unknown, u...)
	}
	return voided, unknown, nil
}
