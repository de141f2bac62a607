package promotion

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/store"
)

// Code pool errors.
var (
	// ErrNoPoolForKind means codes were uploaded for a promotion whose kind
	// takes no code pool: only coupon promotions do.
	ErrNoPoolForKind = errors.New("promotion: only coupon promotions take uploaded codes")
	// ErrPoolAfterStart means the first codes were uploaded for a
	// promotion that has started: its first claims got generated codes, so
	// it cannot start using a pool now. Top-ups of an existing pool are
	// taken until the promotion ends.
	ErrPoolAfterStart = errors.New("promotion: a code pool must be started before the promotion starts")
	// ErrNotEnoughCodes means a change would raise the stock of a
	// promotion with a code pool above the codes in its pool; the error is
	// a *NotEnoughCodesError.
	ErrNotEnoughCodes = errors.New("promotion: not enough codes in the pool for the stock")
)

// NotEnoughCodesError is a refused raise of the stock of a promotion with
// a code pool: the pool holds fewer codes than the stock asked for, and
// nothing was changed. It matches ErrNotEnoughCodes.
type NotEnoughCodesError struct {
	Stock int64 // the stock asked for
	Codes int64 // the codes in the pool, taken or free
}

func (e *NotEnoughCodesError) Error() string {
	return fmt.Sprintf("promotion: stock %d is above the %d codes in the pool; upload more codes first", e.Stock, e.Codes)
}

// Is makes the error match ErrNotEnoughCodes.
func (e *NotEnoughCodesError) Is(target error) bool { return target == ErrNotEnoughCodes }

// MaxPoolCodes bounds the codes of one promotion's pool.
const MaxPoolCodes = MaxStock

// codesUnknown is Promotion.codes when its pool's size could not be read.
const codesUnknown = -1

// gateStock is the stock the claim gate holds for p: its stock, capped by
// the codes of its pool when it has one, so no claim is accepted that has
// no code to be issued with. While the pool's size is unknown it is 0: a
// promotion never opens above its codes.
func (p Promotion) gateStock() int64 {
	switch {
	case p.codes == codesUnknown:
		return 0
	case p.codes > 0:
		return min(p.Stock, p.codes)
	}
	return p.Stock
}

// PoolAdded is what AddCodes did, with the promotion's stock for
// comparison: a promotion with a code pool accepts at most as many claims
// as its pool has codes, so claims beyond Total wait for the next upload.
type PoolAdded struct {
	store.PoolAdded
	Stock int64
}

// AddCodes adds codes (each valid by issue.ValidPoolCode; the caller
// checks; none only reports the pool) to the pool of coupon promotion id,
// and reports how many were new and duplicates and the pool's size. A
// coupon promotion with codes uploaded takes each claim's code from its
// pool (see issue.Coupon) and accepts at most as many claims as the pool
// has codes: its claim gate's stock is min(stock, codes), and an upload
// raises it, up to the stock, as a change of the stock does (see Patch).
// The first codes must come before the promotion starts
// (ErrPoolAfterStart); codes may be added until it ends (ErrEnded). A
// promotion with more than one segment takes no pool. ErrChangeBusy if a
// change of the promotion held it all the while the upload waited.
func (m *Manager) AddCodes(ctx context.Context, id string, codes []string) (PoolAdded, error) {
	p, err := m.load(ctx, id)
	if err != nil {
		return PoolAdded{}, err
	}
	if p.Kind != KindCoupon {
		return PoolAdded{}, ErrNoPoolForKind
	}
	if p.segmented() {
		return PoolAdded{}, errSegmented("a code pool")
	}
	now := m.cfg.Now()
	if p.ended(now) {
		return PoolAdded{}, ErrEnded
	}
	for i, c := range codes {
		if !issue.ValidPoolCode(c) {
			return PoolAdded{}, invalid("codes", "code %d is not 1-%d printable characters without spaces", i+1, store.MaxPoolCodeLength)
		}
	}
	total, free, err := m.st.PoolSize(ctx, id)
	if err != nil {
		return PoolAdded{}, err
	}
	if total == 0 && !now.Before(p.StartsAt) {
		return PoolAdded{}, ErrPoolAfterStart
	}
	if len(codes) == 0 {
		return PoolAdded{PoolAdded: store.PoolAdded{Total: total, Free: free}, Stock: p.Stock}, nil
	}
	if total+int64(len(codes)) > MaxPoolCodes {
		return PoolAdded{}, invalid("codes", "a pool holds at most %d codes", MaxPoolCodes)
	}
	// The upload is a change of the gate's stock: it takes the
	// promotion's change lease first (lowering the gate's stock to what the
	// pool allows before the upload; a first upload comes before the
	// start, when no claim is accepted, so the gate keeps its stock until
	// the codes are written), then writes the codes, then raises the gate's
	// stock to min(stock, codes) and gives the lease up. A crash in between
	// leaves the gate at most lower than that, which the re-check raises
	// (repair).
	p.codes = total
	below := p.gateStock()
	pt, err := m.op.beginCodes(ctx, id, below)
	if err != nil {
		return PoolAdded{}, domainErr(err)
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sideEffectTimeout)
	defer cancel()
	// Read the stock again under the lease: a change finished before it.
	if sp, err := m.st.GetPromotion(dctx, id); err == nil {
		p.Stock = fromStore(sp).Stock
	}
	added, err := m.st.AddPoolCodes(dctx, id, codes)
	if err != nil {
		if pt != nil {
			if total == 0 {
				p.codes = 0 // no pool yet: the gate holds the stock
			}
			if uerr := pt.Undo(dctx, p.gateStock()); uerr != nil {
				m.log.WarnContext(ctx, "codes not added; the re-check sets Redis back from the database", "promotion", id, "err", uerr)
			}
		}
		return PoolAdded{}, fmt.Errorf("promotion %s: add codes: %w", id, err)
	}
	p.codes = added.Total
	if pt != nil {
		// Undo gives the lease up setting the gate's stock to the value
		// given: here the one the pool allows now.
		switch err := pt.Undo(dctx, p.gateStock()); {
		case errors.Is(err, claim.ErrBelowAccepted):
			// Claims beyond the codes were accepted before the pool capped
			// them (their issue waits for codes): the gate keeps its stock.
		case err != nil:
			m.log.WarnContext(ctx, "codes added; the re-check raises the promotion's stock in Redis to them", "promotion", id, "err", err)
		}
	}
	m.ch.tellChanged(dctx, id)
	return PoolAdded{PoolAdded: added, Stock: p.Stock}, nil
}

// codesRetries bounds how often AddCodes asks for a change lease another
// change holds; the waits double from codesRetryWait.
const (
	codesRetries   = 6
	codesRetryWait = 20 * time.Millisecond
)

// beginCodes takes promotion id's change lease for a code upload, lowering
// the gate's stock to stock if it is above it. A lease another change
// holds is asked for again a few times (a change holds it for one database
// write): ErrChangeBusy if it is still held. nil, nil if Redis does not
// hold the promotion yet: it opens it with the pool's cap.
func (op *opener) beginCodes(ctx context.Context, id string, stock int64) (*claim.Patch, error) {
	wait := codesRetryWait
	for i := 0; ; i++ {
		var pt *claim.Patch
		err := op.m.onGate(ctx, id, func() (err error) {
			pt, _, err = op.m.gate.BeginPatch(ctx, id, claim.Change{Stock: &stock}, patchLease)
			return err
		})
		switch {
		case errors.Is(err, claim.ErrNotFound):
			return nil, nil
		case !errors.Is(err, claim.ErrPatchBusy) || i == codesRetries:
			return pt, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait *= 2
	}
}

// poolCodes reads the size of p's code pool into p.codes: coupon
// promotions only, codesUnknown if it cannot be read.
func (op *opener) poolCodes(ctx context.Context, p *Promotion) error {
	if p.Kind != KindCoupon || p.Mode == ModeGrant || p.segmented() {
		return nil
	}
	total, _, err := op.m.st.PoolSize(ctx, p.ID)
	if err != nil {
		p.codes = codesUnknown
		return fmt.Errorf("promotion %s: read its code pool: %w", p.ID, err)
	}
	p.codes = total
	return nil
}

// withCodes fills in the pool size of each promotion of list, from what
// the loop read before unless a change dropped it (forgetCached): a pool
// only grows, so a size read before is at most too low, which caps the
// gate lower than needed, never higher, and repair reads it afresh before
// it sets Redis.
func (l *loop) withCodes(ctx context.Context, list []Promotion) {
	for i := range list {
		p := &list[i]
		if h := l.handles[p.ID]; h != nil {
			if n := h.codes.Load(); n > 0 {
				p.codes = n - 1
				continue
			}
		}
		if err := l.m.op.poolCodes(ctx, p); err != nil {
			l.log.Warn("cannot read the promotion's code pool; its stock in Redis is left as it is", "promotion", p.ID, "err", err)
			continue
		}
		if h := l.handles[p.ID]; h != nil {
			h.codes.Store(p.codes + 1)
		}
	}
}
