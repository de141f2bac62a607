package promotion

import (
	"context"
	"errors"
	"fmt"

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
)

// MaxPoolCodes bounds the codes of one promotion's pool.
const MaxPoolCodes = MaxStock

// PoolAdded is what AddCodes did, with the promotion's stock for
// comparison: claims beyond the pool's size are dead-lettered, never
// issued without a code.
type PoolAdded struct {
	store.PoolAdded
	Stock int64
}

// AddCodes adds codes (each valid by issue.ValidPoolCode; the caller
// checks; none only reports the pool) to the pool of coupon promotion id, and reports how many were new
// and duplicates and the pool's size. A coupon promotion with codes
// uploaded takes each claim's code from its pool (see issue.Coupon). The
// first codes must come before the promotion starts (ErrPoolAfterStart);
// codes may be added until it ends (ErrEnded).
func (m *Manager) AddCodes(ctx context.Context, id string, codes []string) (PoolAdded, error) {
	p, err := m.load(ctx, id)
	if err != nil {
		return PoolAdded{}, err
	}
	if p.Kind != KindCoupon {
		return PoolAdded{}, ErrNoPoolForKind
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
	added, err := m.st.AddPoolCodes(ctx, id, codes)
	if err != nil {
		return PoolAdded{}, fmt.Errorf("promotion %s: add codes: %w", id, err)
	}
	return PoolAdded{PoolAdded: added, Stock: p.Stock}, nil
}
