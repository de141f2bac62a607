package promotion

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/dibsio/dibs/stream"
)

// Sizing a promotion's confirmation pool from its expected load. Seed 000
// sized a promotion's consumers per instance from its total count alone
// (calculateConsumerCountPerInstance(totalCount, min, max)); dibs does that
// too when nothing else is known (stream.InitialConsumers). A promotion
// may also state the claims per second it expects at its peak: then every
// instance starts
//
//	clamp(ceil(expected / (instances × per-consumer rate)), min, max)
//
// consumers, where instances is how many dibs processes are live (the
// stream registry's presence set) and the per-consumer rate is what one
// consumer of this instance was measured to confirm into the store while
// busy (an EWMA of issued rows per second of handler time). The scaling
// policy still adds and removes consumers within min..max while the pool
// runs; the size only says where it starts.

const (
	// MaxExpectedClaimsPerSecond bounds Promotion.ExpectedClaimsPerSecond.
	MaxExpectedClaimsPerSecond = 10_000_000
	// DefaultConsumerClaimRate is the claims per second one consumer is
	// assumed to confirm before any was measured: a tenth of what one
	// caller writes in batches of 10 on the SQLite and PostgreSQL figures of
	// docs/benchmarks.md, so an unmeasured instance errs towards more
	// consumers.
	DefaultConsumerClaimRate = 1000
	// sizeEvery is how often, in re-check intervals, the loop announces the
	// instance and re-reads the live instance count, while some promotion
	// states an expected rate.
	sizeEvery = 5
	// rateWeight is the EWMA weight of a new per-consumer rate sample.
	rateWeight = 0.2
)

// PoolSize is the consumer count one instance starts for a promotion that
// expects expected claims per second, with instances live instances
// sharing it and perConsumer claims per second confirmed by one consumer:
// ceil(expected / (instances × perConsumer)) clamped to minC..maxC. It is
// 0 when expected is not positive (nothing stated: the pool is sized from
// the promotion's stock instead). Fewer than one instance counts as one; a
// rate that is not positive counts as DefaultConsumerClaimRate.
func PoolSize(expected int64, instances int, perConsumer float64, minC, maxC int) int {
	if expected <= 0 {
		return 0
	}
	instances = max(instances, 1)
	if perConsumer <= 0 || math.IsNaN(perConsumer) || math.IsInf(perConsumer, 0) {
		perConsumer = DefaultConsumerClaimRate
	}
	n := math.Ceil(float64(expected) / (float64(instances) * perConsumer))
	if n > float64(maxC) {
		return maxC
	}
	return max(int(n), minC)
}

// rateMeter is an EWMA of one consumer's confirmation rate while busy, in
// claims per second: written by the issuers (any pool goroutine) with a
// compare-and-swap, read by the loop. Zero until the first sample.
type rateMeter struct{ bits atomic.Uint64 }

// observe adds a sample: rows confirmed by one handler call that took took.
func (r *rateMeter) observe(rows int, took time.Duration) {
	if rows <= 0 || took <= 0 {
		return
	}
	sample := float64(rows) / took.Seconds()
	for {
		old := r.bits.Load()
		next := sample
		if old != 0 {
			next = (1-rateWeight)*math.Float64frombits(old) + rateWeight*sample
		}
		if r.bits.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

// rate is the current estimate, 0 before any sample.
func (r *rateMeter) rate() float64 { return math.Float64frombits(r.bits.Load()) }

// presenceKey is the sorted set in which the instances under prefix
// announce themselves (see stream.Registry.Instances).
func presenceKey(prefix string) string { return prefix + "instances" }

// sizer sizes the promotions' pools: the loop's (owned by its goroutine),
// with the live instance count it last read and when.
type sizer struct {
	reg   *stream.Registry
	rates *rateMeter
	// announced is set once the instance announced itself in the presence
	// set (Manager.announced, read by Stop).
	announced *atomic.Bool
	presence  string           // presenceKey
	every     time.Duration    // how often it re-reads the count: sizeEvery re-checks
	now       func() time.Time // Config.Now
	log       *slog.Logger
	// instances is the live instance count last read (0 before any), at
	// lastCount.
	instances int
	lastCount time.Time
}

// resize recomputes the pool size of every promotion in list that states
// an expected rate, into its handle in handles, re-reading the live
// instance count every sizeEvery re-checks (and on the first); a
// promotion's size takes effect the next time its pool starts.
func (sz *sizer) resize(ctx context.Context, list []Promotion, handles map[string]*handle, first bool) {
	stated := false
	for _, p := range list {
		if p.ExpectedClaimsPerSecond > 0 {
			stated = true
			break
		}
	}
	if !stated {
		return
	}
	now := sz.now()
	if first || sz.instances == 0 || now.Sub(sz.lastCount) >= sz.every {
		sz.lastCount = now
		n, err := sz.reg.Instances(ctx, sz.presence, 3*sz.every)
		if err != nil {
			sz.log.Warn("cannot count the live instances; pools are sized as before", "err", err)
		} else {
			sz.instances = n
			sz.announced.Store(true)
		}
	}
	for _, p := range list {
		if h := handles[p.ID]; h != nil {
			h.size.Store(sz.size(p))
		}
	}
}

// size is PoolSize for p with the instance count last read and the rate
// measured so far.
func (sz *sizer) size(p Promotion) int32 {
	st := sz.reg.Config()
	return int32(PoolSize(p.ExpectedClaimsPerSecond, sz.instances, sz.rates.rate(), st.MinConsumers, st.MaxConsumers))
}
