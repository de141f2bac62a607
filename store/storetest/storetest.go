package storetest

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/store"
)

// Run runs the whole suite against stores made by open (a fresh, empty,
// migrated store per call). Every subtest runs in parallel with its own store.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Migrate", testMigrate},
		{"Ping", testPing},
		{"SchemaVersion", testSchemaVersion},
		{"CreateGetPromotion", testCreateGetPromotion},
		{"ListPromotions", testListPromotions},
		{"ClosePromotion", testClosePromotion},
		{"Drained", testDrained},
		{"Retire", testRetire},
		{"IssueBatchInserted", testIssueBatchInserted},
		{"IssueBatchOutcomes", testIssueBatchOutcomes},
		{"IssueBatchLarge", testIssueBatchLarge},
		{"IssueBatchConcurrent", testIssueBatchConcurrent},
		{"CodesUnique", testCodesUnique},
		{"CodeCollision", testCodeCollision},
		{"PointsConcurrent", testPointsConcurrent},
		{"Voucher", testVoucher},
		{"DeadLetters", testDeadLetters},
		{"DeadLettersPaging", testDeadLettersPaging},
		{"DeadLetterMismatch", testDeadLetterMismatch},
		{"TransitionConcurrent", testTransitionConcurrent},
		{"UnappliedDeadLetters", testUnappliedDeadLetters},
		{"UnhandledDeadLetters", testUnhandledDeadLetters},
		{"VoidSkipsIssued", testVoidSkipsIssued},
		{"IssueSkipsVoided", testIssueSkipsVoided},
		{"CountsSkipNonClaims", testCountsSkipNonClaims},
		{"Counts", testCounts},
		{"MaxRanks", testMaxRanks},
		{"ClaimsByRank", testClaimsByRank},
		{"ClaimsByRankPaging", testClaimsByRankPaging},
		{"WebhookPromotion", testWebhookPromotion},
		{"PoolUpload", testPoolUpload},
		{"PoolIssue", testPoolIssue},
		{"PoolDry", testPoolDry},
	}
	tests = append(tests, adminTests...)
	tests = append(tests, patchTests...)
	tests = append(tests, eventTests...)
	tests = append(tests, reportTests...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

// Bench runs BenchmarkIssueBatch's cases (batches of 10, 100 and 500 new
// claims of users in random order, batches of 10 coupon claims with their
// codes, and Balance of users with many ledger entries) against a store
// made by open.
func Bench(b *testing.B, open func(tb testing.TB) store.Store) {
	for _, size := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			p := promo("bench")
			if err := s.CreatePromotion(ctx, p); err != nil {
				b.Fatal(err)
			}
			at := now()
			rank := int64(0)
			batch := make([]store.Issue, size)
			b.ReportAllocs()
			for b.Loop() {
				for i := range batch {
					rank++
					batch[i] = issue(p.ID, rank, benchUser(rank), 1, at)
				}
				out, err := s.IssueBatch(ctx, batch)
				if err != nil {
					b.Fatal(err)
				}
				if out[0] != store.Inserted {
					b.Fatalf("outcome %s, want inserted", out[0])
				}
			}
			b.ReportMetric(float64(rank)/b.Elapsed().Seconds(), "claims/s")
		})
	}
	// Concurrent callers, as a pool of issuers would be: what grouping
	// batches into fewer transactions (or a bigger pool) buys.
	b.Run("batch=10/parallel=16", func(b *testing.B) {
		s := open(b)
		p := promo("bench")
		if err := s.CreatePromotion(context.Background(), p); err != nil {
			b.Fatal(err)
		}
		issueParallel(b, s, p, 16, 10, nil)
	})
	benchGrants(b, open)
}

// issueParallel issues batches of size new claims of p from callers at
// once, as a pool of issuers would, each claim with the grant that grant
// makes for it (nil: none), and reports the claims per second.
func issueParallel(b *testing.B, s store.Store, p store.Promotion, callers, size int, grant func(store.Issue) (store.Grant, error)) {
	ctx := context.Background()
	at := now()
	var next atomic.Int64
	b.SetParallelism(callers / max(1, runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		batch := make([]store.Issue, size)
		for pb.Next() {
			for i := range batch {
				rank := next.Add(1)
				batch[i] = issue(p.ID, rank, benchUser(rank), 1, at)
				if grant == nil {
					continue
				}
				g, err := grant(batch[i])
				if err != nil {
					b.Error(err)
					return
				}
				batch[i].Grant = g
			}
			if _, err := s.IssueBatch(ctx, batch); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(next.Load())/b.Elapsed().Seconds(), "claims/s")
}

// benchUser is the user of the claim of rank n in the benchmarks: claims
// arrive from users in no order, so each rank's user is a scramble of n
// (one user per rank, as a per-user limit of 1 would have it).
func benchUser(n int64) string {
	x := uint64(n) * 0x9e3779b97f4a7c15
	x ^= x >> 31
	return fmt.Sprintf("u%016x", x)
}

// now is the current time at the precision both backends store.
func now() time.Time {
	return time.Now().UTC().Truncate(time.Microsecond)
}

func promo(id string) store.Promotion {
	start := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	return store.Promotion{
		ID:           id,
		Name:         "Promotion " + id,
		Mode:         store.ModeFirstCome,
		Kind:         store.KindCoupon,
		Stock:        1000,
		PerUserLimit: 2,
		Value:        5000,
		StartsAt:     start,
		EndsAt:       start.Add(24 * time.Hour),
		CreatedAt:    start.Add(-time.Hour),
	}
}

func issue(promotionID string, rank int64, user string, slot int, at time.Time) store.Issue {
	return store.Issue{
		ClaimID:     fmt.Sprintf("%s#%d", promotionID, rank),
		PromotionID: promotionID,
		UserID:      user,
		Rank:        rank,
		Slot:        slot,
		AcceptedAt:  at,
	}
}

func mustCreate(t *testing.T, s store.Store, ps ...store.Promotion) {
	t.Helper()
	for _, p := range ps {
		if err := s.CreatePromotion(t.Context(), p); err != nil {
			t.Fatalf("create promotion %s: %v", p.ID, err)
		}
	}
}

// equalPromotion compares promotions field by field, times with Equal.
func equalPromotion(t *testing.T, got, want store.Promotion) {
	t.Helper()
	times := []struct {
		name      string
		got, want time.Time
	}{
		{"StartsAt", got.StartsAt, want.StartsAt},
		{"EndsAt", got.EndsAt, want.EndsAt},
		{"ClosedAt", got.ClosedAt, want.ClosedAt},
		{"CreatedAt", got.CreatedAt, want.CreatedAt},
		{"ArchivedAt", got.ArchivedAt, want.ArchivedAt},
		{"DrainedAt", got.DrainedAt, want.DrainedAt},
		{"RetiredAt", got.RetiredAt, want.RetiredAt},
	}
	for _, tt := range times {
		if !tt.got.Equal(tt.want) {
			t.Errorf("promotion %s: %s = %v, want %v", want.ID, tt.name, tt.got, tt.want)
		}
		if !tt.got.IsZero() && tt.got.Location() != time.UTC {
			t.Errorf("promotion %s: %s location %v, want UTC", want.ID, tt.name, tt.got.Location())
		}
	}
	for _, p := range []*store.Promotion{&got, &want} {
		p.StartsAt, p.EndsAt, p.ClosedAt, p.CreatedAt, p.ArchivedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
		p.DrainedAt, p.RetiredAt = time.Time{}, time.Time{}
		p.Segments = max(p.Segments, 1) // stored as 1 when left 0
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("promotion %s:\n got %+v\nwant %+v", want.ID, got, want)
	}
}

func ids(ps []store.Promotion) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}
