package promotion_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
)

func TestPoolSize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		expected    int64
		instances   int
		perConsumer float64
		min, max    int
		want        int
	}{
		{0, 1, 1000, 1, 32, 0},             // nothing stated: the stream sizes it
		{-5, 1, 1000, 1, 32, 0},            // nor anything negative
		{1, 1, 1000, 1, 32, 1},             // a trickle: min
		{1000, 1, 1000, 1, 32, 1},          // exactly one consumer's worth
		{1001, 1, 1000, 1, 32, 2},          // just over: rounded up
		{10_000, 1, 1000, 1, 32, 10},       // ten consumers' worth
		{10_000, 4, 1000, 1, 32, 3},        // shared by four instances: ceil(2.5)
		{10_000, 4, 1000, 4, 32, 4},        // never below min
		{1_000_000, 1, 1000, 1, 32, 32},    // never above max
		{10_000, 0, 1000, 1, 32, 10},       // no instance count yet: one
		{10_000, -1, 1000, 1, 32, 10},      // nor a negative one
		{10_000, 1, 0, 1, 32, 10},          // no rate measured: the default
		{10_000, 1, math.NaN(), 1, 32, 10}, // nor a broken one
		{10_000, 1, math.Inf(1), 1, 32, 10},
		{10_000, 2, 250, 1, 32, 20}, // a slow store: more consumers
		{promotion.MaxExpectedClaimsPerSecond, 1, 0.001, 1, 32, 32},
	} {
		t.Run(fmt.Sprintf("%d/%d/%g/%d-%d", tt.expected, tt.instances, tt.perConsumer, tt.min, tt.max), func(t *testing.T) {
			if got := promotion.PoolSize(tt.expected, tt.instances, tt.perConsumer, tt.min, tt.max); got != tt.want {
				t.Fatalf("PoolSize = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestExpectedRateSizesThePool: a promotion that expects many claims per
// second starts more consumers than one that states nothing; a rate out
// of range is refused.
func TestExpectedRateSizesThePool(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	sc := fastStream()
	sc.MinConsumers, sc.MaxConsumers = 1, 6
	m := w.startManager(t, promotion.Config{Instance: "a", Stream: sc})
	ctx := context.Background()
	create(t, m, promotion.Promotion{ID: "busy", Stock: 100, ExpectedClaimsPerSecond: promotion.MaxExpectedClaimsPerSecond})
	create(t, m, promotion.Promotion{ID: "plain", Stock: 100})
	consumers := func(id string, want int) {
		t.Helper()
		if _, err := m.Claim(ctx, id, "u1", ""); err != nil {
			t.Fatal(err)
		}
		wait.For(t, 30*time.Second, fmt.Sprintf("%s's pool with %d consumers", id, want), func() bool {
			p := m.Registry().Pool(id)
			return p != nil && p.Consumers() == want
		})
	}
	consumers("plain", 1)
	// Far more than six consumers' worth at any rate one consumer can
	// confirm: the pool starts at max.
	consumers("busy", sc.MaxConsumers)

	_, err := m.Create(ctx, promotion.Promotion{ID: "bad", Stock: 1, ExpectedClaimsPerSecond: -1})
	if err == nil {
		t.Fatal("negative expected_claims_per_second accepted")
	}
}
