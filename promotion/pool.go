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

// MaxPoolCodes bounds the codes of one promotion's pool.
const MaxPoolCodes = MaxStock

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
	p, err := load(ctx, m.st, id)
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
	pt, err := beginCodes(ctx, &m.lc, m.gate, id, below)
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
	m.wk.tellChanged(dctx, id)
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
func beginCodes(ctx context.Context, lc *loopClient, gate *claim.Gate, id string, stock int64) (*claim.Patch, error) {
	wait := codesRetryWait
	for i := 0; ; i++ {
		var pt *claim.Patch
		err := lc.onGate(ctx, id, func() (err error) {
			pt, _, err = gate.BeginPatch(ctx, id, claim.Change{Stock: &stock}, patchLease)
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
