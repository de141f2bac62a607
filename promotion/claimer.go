package promotion

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dibsio/dibs/claim"
)

// claimer takes claims to their scripts and answers them: the claim
// paths (claimPlain, claimRoomed, claimSegmented) and what they share. Its
// methods run in the requests' goroutines; they take no lock, never block
// on another goroutine, and reach the loop only through the loop client.
type claimer struct {
	gate   *claim.Gate
	batch  *claim.Batcher // nil with Config.UnbatchedClaims
	known  *published
	lc     *loopClient
	wk     *waker
	jr     *journals
	sold   *soldMemory
	fences *fences
	rooms  *roomOps
	// onRemaining is Config.OnRemaining.
	onRemaining func(promotionID string, remaining int64)
}

// route is the method that takes claim c to its script: the path of the
// handle the loop published for its promotion (c.h), or, for a promotion
// not published here, claimRoomed (Redis tells whether it has a room).
func route(c claimArgs) func(*claimer, context.Context, claimArgs) (Claimed, error) {
	if c.h == nil {
		return (*claimer).claimRoomed
	}
	switch c.h.claim {
	case pathPlain:
		return (*claimer).claimPlain
	case pathSegmented:
		return (*claimer).claimSegmented
	}
	return (*claimer).claimRoomed
}

// claimArgs is one claim on its way to its script.
type claimArgs struct {
	// h is the promotion's published handle, nil if the loop has not
	// published it.
	h                          *handle
	id, userID, idemKey, token string
	// retried is set once the claim found the promotion missing in Redis
	// and the loop opened it: it is not opened a second time.
	retried bool
}

// pathOf is the claim path of promotion p's handle.
func pathOf(p Promotion) claimPath {
	switch {
	case p.segmented():
		return pathSegmented
	case p.WaitingRoom.Enabled:
		return pathRoomed
	default:
		return pathPlain
	}
}

// fromMemory answers a claim without an Idempotency-Key on a promotion a
// claim recently found sold out or ended from this instance's memory
// (soldout.go); nil if it must run the script.
func (cl *claimer) fromMemory(c claimArgs, room bool) error {
	if c.idemKey != "" {
		return nil
	}
	err := cl.sold.remembered(c.id, c.userID, room)
	if err != nil {
		cl.reportRemaining(c.id, Claimed{}, err)
	}
	return err
}

// claimAnswered finishes a claim of a promotion without segments after its
// script answered res, err: an accepted claim raises the fence, wakes the
// pool and is journaled; a failed one is learned by the sold-out memory
// (epoch is the memory's epoch before the script ran), and refused says
// why an entry token was not accepted, if it was not.
func (cl *claimer) claimAnswered(ctx context.Context, c claimArgs, res claim.Result, err error, epoch uint64, refused error) (Claimed, error) {
	if err == nil {
		cl.fences.raise(c.id, res.Rank)
		cl.wk.wakePool(c.id)
		if !res.Replayed {
			cl.jr.journalAccepted(c.id, c.userID, c.idemKey, res)
		}
		cl.reportRemaining(c.id, Claimed(res), nil)
		return Claimed(res), nil
	}
	if errors.Is(err, claim.ErrNotFound) && !c.retried {
		return cl.claimMissed(ctx, c)
	}
	cl.lc.gateFailed(c.id, err)
	if errors.Is(err, claim.ErrWrongMode) {
		// A promotion with segments this instance had not published yet.
		if cl, ok, err := cl.claimUnpublished(ctx, c.id, c.userID, c.idemKey); ok {
			return cl, err
		}
	}
	cl.sold.learn(c.id, err, epoch)
	if errors.Is(err, claim.ErrNotAdmitted) && refused != nil {
		err = fmt.Errorf("%w: %w", err, refused)
	}
	cl.reportRemaining(c.id, Claimed{}, err)
	return Claimed{}, domainErr(err)
}

// claimMissed takes a claim whose script found no promotion: the loop
// decides (see onGate), and once it opened the promotion the claim runs
// once more, on the path of the handle the loop published for it.
func (cl *claimer) claimMissed(ctx context.Context, c claimArgs) (Claimed, error) {
	if err := cl.lc.awaitOpen(ctx, c.id, Promotion{}, false); err != nil {
		return Claimed{}, domainErr(err)
	}
	c.retried = true
	c.h = cl.known.lookup(c.id)
	return route(c)(cl, ctx, c)
}

// reportRemaining hands Config.OnRemaining the stock a claim's answer
// tells of: an accepted claim's Remaining, none for a sold-out answer. A
// replayed claim, and any other answer, tells nothing. Only for a promotion
// without segments: a segmented claim tells of its segment's stock.
func (cl *claimer) reportRemaining(id string, c Claimed, err error) {
	if cl.onRemaining == nil {
		return
	}
	switch {
	case err == nil && !c.Replayed && c.Remaining >= 0:
		cl.onRemaining(id, c.Remaining)
	case errors.Is(err, claim.ErrSoldOut):
		cl.onRemaining(id, 0)
	}
}

// claimPlain is the claim path of a promotion the loop published with no
// waiting room: the plain claim script, with the promotion's fence, in a
// batch with the claims of the promotion queued beside it (unless
// Config.UnbatchedClaims).
func (cl *claimer) claimPlain(ctx context.Context, c claimArgs) (Claimed, error) {
	if err := cl.fromMemory(c, false); err != nil {
		return Claimed{}, err
	}
	epoch := cl.sold.epoch.Load()
	id, userID, idemKey := c.id, c.userID, c.idemKey
	fence := cl.fences.get(id)
	var (
		res claim.Result
		err error
	)
	if b := cl.batch; b != nil { // in one call with the claims queued beside it
		res, err = b.Claim(ctx, id, userID, idemKey, fence)
	} else {
		res, err = cl.gate.ClaimFenced(ctx, id, userID, idemKey, fence)
	}
	return cl.claimAnswered(ctx, c, res, err, epoch, nil)
}

// claimRoomed is the claim path of a promotion with a waiting room, and of
// one the loop has not published: the claim script that spends a pass,
// which finds out from Redis whether the room exists (a promotion created
// by another instance a moment ago may have one).
func (cl *claimer) claimRoomed(ctx context.Context, c claimArgs) (Claimed, error) {
	pass, refused := cl.rooms.verifyPass(c.id, c.userID, c.token)
	if err := cl.fromMemory(c, true); err != nil {
		return Claimed{}, err
	}
	epoch := cl.sold.epoch.Load()
	id, userID, idemKey := c.id, c.userID, c.idemKey
	fence := cl.fences.get(id)
	keys := cl.rooms.spendKeys(id)
	res, err := cl.gate.ClaimRoomed(ctx, id, userID, idemKey, fence, keys, pass)
	return cl.claimAnswered(ctx, c, res, err, epoch, refused)
}

// claimSegmented admits a claim of a promotion with segments, whose
// handle c.h the loop published: from the user's segment, borrowing stock
// from the others when it ran dry (claim.Gate.ClaimSegmented), and wakes
// that segment's pool. If Redis does not hold a segment, the loop opens
// the promotion and the claim runs once more.
func (cl *claimer) claimSegmented(ctx context.Context, c claimArgs) (Claimed, error) {
	res, err := cl.gate.ClaimSegmented(ctx, c.h.segs, c.userID, c.idemKey)
	if err != nil {
		if errors.Is(err, claim.ErrNotFound) && !c.retried {
			return cl.claimMissed(ctx, c)
		}
		cl.lc.gateFailed(c.h.id, err)
		return Claimed{}, domainErr(err)
	}
	cl.wk.wakePool(c.h.segs.TagOfRank(res.Rank))
	return Claimed(res), nil
}

// segmentedHandle returns the published handle of promotion id if it has
// segments, else nil.
func (cl *claimer) segmentedHandle(id string) *handle {
	if h := cl.known.lookup(id); h != nil && h.segs.N() > 1 {
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
func (cl *claimer) claimUnpublished(ctx context.Context, id, userID, idemKey string) (Claimed, bool, error) {
	if h := cl.segmentedHandle(id); h != nil {
		c, err := cl.claimSegmented(ctx, claimArgs{h: h, id: id, userID: userID, idemKey: idemKey})
		return c, true, err
	}
	n, err := cl.gate.SegmentCount(ctx, id)
	if err != nil || n < 2 {
		return Claimed{}, false, nil
	}
	res, err := cl.gate.ClaimSegmented(ctx, claim.SegmentsOf(id, n), userID, idemKey)
	if err != nil {
		return Claimed{}, true, domainErr(err)
	}
	cl.lc.asks.send(ask{kind: askPool, id: id, asked: time.Now()})
	return Claimed(res), true, nil
}
