package promotion

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dibsio/dibs/claim"
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

// claimSegmented admits a claim of a promotion with segments, whose
// handle c.h the loop published: from the user's segment, borrowing stock
// from the others when it ran dry (claim.Gate.ClaimSegmented), and wakes
// that segment's pool. If Redis does not hold a segment, the loop opens
// the promotion and the claim runs once more.
func (ad *admission) claimSegmented(ctx context.Context, c claimArgs) (Claimed, error) {
	res, err := ad.m.gate.ClaimSegmented(ctx, c.h.segs, c.userID, c.idemKey)
	if err != nil {
		if errors.Is(err, claim.ErrNotFound) && !c.retried {
			return ad.claimMissed(ctx, c)
		}
		ad.gateFailed(c.h.id, err)
		return Claimed{}, domainErr(err)
	}
	ad.m.wk.wakePool(c.h.segs.TagOfRank(res.Rank))
	return Claimed(res), nil
}

// segmentedHandle returns the published handle of promotion id if it has
// segments, else nil.
func (ad *admission) segmentedHandle(id string) *handle {
	if h := (*ad.m.known.Load())[id]; h != nil && h.segs.N() > 1 {
		return h
	}
	return nil
}

// claimUnpublished admits a claim that found a segment's meta hash
// (ErrWrongMode) on a promotion this instance has not published yet (one
// created on another instance a moment ago): the layout comes from the
// segment count in segment 0's meta hash (claim.Gate.SegmentCount), so the
// claim waits for neither the loop nor the database. false if the meta
// hash holds no count; the caller answers as it would have.
func (ad *admission) claimUnpublished(ctx context.Context, id, userID, idemKey string) (Claimed, bool, error) {
	if h := ad.segmentedHandle(id); h != nil {
		c, err := ad.claimSegmented(ctx, claimArgs{h: h, id: id, userID: userID, idemKey: idemKey})
		return c, true, err
	}
	n, err := ad.m.gate.SegmentCount(ctx, id)
	if err != nil || n < 2 {
		return Claimed{}, false, nil
	}
	res, err := ad.m.gate.ClaimSegmented(ctx, claim.SegmentsOf(id, n), userID, idemKey)
	if err != nil {
		return Claimed{}, true, domainErr(err)
	}
	ad.m.ask(ask{kind: askPool, id: id, asked: time.Now()})
	return Claimed(res), true, nil
}

// segmentOps reads, ends, closes and voids a promotion over all its
// segments (one segment for a promotion without any).
type segmentOps struct{ m *Manager }

// segmentsFor returns the segment layout of promotion id: the published
// handle's, else the database's definition's.
func (so *segmentOps) segmentsFor(ctx context.Context, id string) (claim.Segments, error) {
	if h := (*so.m.known.Load())[id]; h != nil {
		return h.segs, nil
	}
	p, err := so.m.load(ctx, id)
	if err != nil {
		return claim.Segments{}, err
	}
	return p.layout(), nil
}

// segmentHandles makes the handles of p's segments 1..N-1.
func (l *loop) segmentHandles(p Promotion, segs claim.Segments) []*handle {
	out := make([]*handle, 0, segs.N()-1)
	for k := 1; k < segs.N(); k++ {
		tag := segs.Tag(k)
		h := &handle{id: tag, segs: segs, claim: (*admission).claimSegmented}
		h.size.Store(l.poolSize(p))
		sp := p.toStore()
		h.promo.Store(&sp)
		h.spec = l.m.poolSpec(p, tag, segs.Share(k, p.Stock), h)
		out = append(out, h)
	}
	return out
}

// poolSpec is the confirmation pool of the stream under keyID's keys
// (promotion p's own, or one of its segments'), issuing into p. The pool's
// log lines name the promotion (and the segment).
func (m *Manager) poolSpec(p Promotion, keyID string, expected int64, h *handle) stream.Spec {
	k := m.gate.Keys(keyID)
	log := m.log.With("promotion", p.ID)
	if keyID != p.ID {
		log = log.With("segment", keyID)
	}
	return stream.Spec{
		Logger:           log,
		Stream:           k.Stream(),
		Group:            claim.Group,
		Handler:          &liveIssuer{h: h, base: issuer{m: m, promotionID: p.ID, keyID: keyID, segmented: p.segmented()}},
		Ack:              m.acker(keyID),
		OnDeadLetter:     m.dl.deadLettererOn(p.ID, keyID),
		DeadLetterStream: k.DeadLetters(),
		ExpectedTotal:    expected,
		Size:             func() int { return int(h.size.Load()) },
	}
}

// openSegments makes the Redis state of every segment of p exist. floor is
// the highest rank the database holds: a segment Redis lost is made again
// with no units (claim.Gate.OpenSegments), and that is logged.
func (op *opener) openSegments(ctx context.Context, p Promotion, floor int64) error {
	made, err := op.m.gate.OpenSegments(ctx, p.gate(), p.layout(), floor)
	if len(made) > 0 && floor > 0 {
		op.m.log.Warn("segments of the promotion were missing in Redis though the database holds its claims: they were made again with no units; the units they held are not sold",
			"promotion", p.ID, "segments", made, "database_max_rank", floor)
	}
	return err
}

// segmentWork starts or wakes the pools of the segments 1..N-1 of the
// promotions in list whose streams have work (every one on the first
// re-check), settles their transfers in flight, and reports which
// promotions have a segment pool running or work in a segment.
func (l *loop) segmentWork(ctx context.Context, list []Promotion, first bool) (map[string]bool, error) {
	var segs []Promotion // one entry per segment 1..N-1, ID its tag
	var owner []string
	for _, p := range list {
		if !p.segmented() {
			continue
		}
		layout := l.handles[p.ID].segs
		if err := l.gate.SettleTransfers(ctx, layout); err != nil {
			l.log.Warn("cannot settle transfers of stock between segments; the next re-check retries", "promotion", p.ID, "err", err)
		}
		for _, tag := range layout.Tags()[1:] {
			segs = append(segs, Promotion{ID: tag})
			owner = append(owner, p.ID)
		}
	}
	busy := make(map[string]bool)
	works, werrs := l.m.groupWorks(ctx, segs)
	var errs []error
	for i, s := range segs {
		if werrs[i] != nil {
			errs = append(errs, werrs[i])
			busy[owner[i]] = true
			continue
		}
		if works[i].busy() || first {
			busy[owner[i]] = true
			if _, err := l.m.wk.startOrWakePool(ctx, l.handles[s.ID]); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if l.reg.Running(s.ID) {
			busy[owner[i]] = true
		}
	}
	return busy, errors.Join(errs...)
}

// state reads p's live Redis state: its own, or the sum of its segments'
// with the units in flight between them counted in its stock.
func (so *segmentOps) state(ctx context.Context, p Promotion) (claim.State, error) {
	if !p.segmented() {
		return so.m.gate.State(ctx, p.ID)
	}
	st, err := so.m.gate.SegmentStates(ctx, p.layout())
	if err != nil {
		return claim.State{}, err
	}
	return claim.SegmentsState(st), nil
}

// ended decides whether p has ended (see claim.Gate.Ended), over all its
// segments, and returns the ranks it handed out.
func (so *segmentOps) ended(ctx context.Context, p Promotion) (bool, int64, error) {
	if !p.segmented() {
		return so.m.gate.Ended(ctx, p.ID)
	}
	return so.m.gate.EndedSegments(ctx, p.layout())
}

// closeOnGate closes p in Redis: every segment of it.
func (so *segmentOps) closeOnGate(ctx context.Context, p Promotion) error {
	if !p.segmented() {
		return so.m.gate.Close(ctx, p.ID)
	}
	return so.m.gate.CloseSegments(ctx, p.layout())
}

// segmentKeys lists the Redis keys of p's segments 1..N-1, for retirement.
func (so *segmentOps) segmentKeys(p Promotion) []string {
	var out []string
	for i, tag := range p.layout().Tags() {
		k := so.m.gate.Keys(tag)
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
		v, u, err := so.m.gate.Void(ctx, tag, rs...)
		if err != nil {
			return 0, nil, fmt.Errorf("return %d units of %s to stock: %w", len(rs), id, err)
		}
		voided += v
		unknown = append(unknown, u...)
	}
	return voided, unknown, nil
}
