package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"sync"
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

// Bench runs BenchmarkIssueBatch's cases (batches of 10 and 100 new claims,
// batches of 10 coupon claims with their codes, and Balance of users with
// many ledger entries) against a store made by open.
func Bench(b *testing.B, open func(tb testing.TB) store.Store) {
	for _, size := range []int{10, 100} {
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
					batch[i] = issue(p.ID, rank, fmt.Sprintf("u%d", rank), 1, at)
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
		ctx := context.Background()
		p := promo("bench")
		if err := s.CreatePromotion(ctx, p); err != nil {
			b.Fatal(err)
		}
		at := now()
		var next atomic.Int64
		b.SetParallelism(16 / max(1, runtime.GOMAXPROCS(0)))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			batch := make([]store.Issue, 10)
			for pb.Next() {
				for i := range batch {
					rank := next.Add(1)
					batch[i] = issue(p.ID, rank, fmt.Sprintf("u%d", rank), 1, at)
				}
				if _, err := s.IssueBatch(ctx, batch); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(next.Load())/b.Elapsed().Seconds(), "claims/s")
	})
	benchGrants(b, open)
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

func testMigrate(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("kept"))
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Migrate: %v", err)
	}
	if _, err := s.GetPromotion(ctx, "kept"); err != nil {
		t.Fatalf("promotion lost by Migrate: %v", err)
	}
}

func testPing(t *testing.T, s store.Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func testCreateGetPromotion(t *testing.T, s store.Store) {
	ctx := t.Context()
	full := promo("full")
	full.Mode = store.ModeGrant
	full.Kind = store.KindPoint
	full.Stock = 0
	full.PerUserLimit = 1
	full.Value = 1 << 40
	full.StartsAt = time.Date(2026, 3, 1, 12, 30, 15, 123456000, time.FixedZone("KST", 9*3600))
	full.EndsAt = full.StartsAt.Add(90 * time.Minute)
	full.ClosedAt = full.StartsAt.Add(time.Minute)
	full.WaitingRoom = store.WaitingRoom{Enabled: true, AdmitPerSecond: 100, EntryTTLSeconds: 300,
		AbandonAfterSeconds: 45, PrequeueSeconds: 600, PrequeueSeed: bytes.Repeat([]byte{0xa5, 0x00, 0xff}, 11)[:32]}
	full.Drained = true
	full.ExpectedClaimsPerSecond = 2500
	full.Segments = 7

	defaults := promo("defaults")
	defaults.CreatedAt = time.Time{}

	mustCreate(t, s, promo("plain"), full)
	before := now()
	mustCreate(t, s, defaults)
	after := now().Add(time.Second)

	for _, want := range []store.Promotion{promo("plain"), full} {
		got, err := s.GetPromotion(ctx, want.ID)
		if err != nil {
			t.Fatalf("GetPromotion(%s): %v", want.ID, err)
		}
		equalPromotion(t, got, want)
	}

	got, err := s.GetPromotion(ctx, "defaults")
	if err != nil {
		t.Fatalf("GetPromotion(defaults): %v", err)
	}
	// A zero CreatedAt is filled in with the time of creation.
	if got.CreatedAt.Before(before.Add(-time.Second)) || got.CreatedAt.After(after) {
		t.Errorf("CreatedAt = %v, want between %v and %v", got.CreatedAt, before, after)
	}
	defaults.CreatedAt = got.CreatedAt
	equalPromotion(t, got, defaults)

	t.Run("exists", func(t *testing.T) {
		other := promo("plain")
		other.Name = "another"
		err := s.CreatePromotion(ctx, other)
		if !errors.Is(err, store.ErrAlreadyExists) {
			t.Fatalf("CreatePromotion of a taken id: %v, want ErrAlreadyExists", err)
		}
		got, err := s.GetPromotion(ctx, "plain")
		if err != nil {
			t.Fatal(err)
		}
		equalPromotion(t, got, promo("plain"))
	})
	t.Run("not found", func(t *testing.T) {
		_, err := s.GetPromotion(ctx, "missing")
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetPromotion(missing): %v, want ErrNotFound", err)
		}
		if errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("GetPromotion(missing): %v is not an outage", err)
		}
	})
}

func testListPromotions(t *testing.T, s store.Store) {
	ctx := t.Context()
	var want []string
	// Created out of order: the list is ordered by id, not by creation.
	for _, i := range []int{4, 0, 6, 2, 5, 1, 3} {
		mustCreate(t, s, promo(fmt.Sprintf("p-%02d", i)))
	}
	for i := range 7 {
		want = append(want, fmt.Sprintf("p-%02d", i))
	}

	var got []string
	after := ""
	for page := 0; ; page++ {
		ps, err := s.ListPromotions(ctx, after, 3)
		if err != nil {
			t.Fatalf("ListPromotions(%q, 3): %v", after, err)
		}
		if len(ps) > 3 {
			t.Fatalf("page %d has %d promotions, limit 3", page, len(ps))
		}
		if len(ps) == 0 {
			break
		}
		got = append(got, ids(ps)...)
		after = ps[len(ps)-1].ID
		if page > 10 {
			t.Fatal("pagination does not end")
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged ids %v, want %v", got, want)
	}

	all, err := s.ListPromotions(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(all), want) {
		t.Fatalf("ListPromotions(\"\", 100) = %v, want %v", ids(all), want)
	}
	equalPromotion(t, all[3], promo("p-03"))

	mid, err := s.ListPromotions(ctx, "p-02", 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(mid), []string{"p-03", "p-04"}) {
		t.Fatalf("ListPromotions(p-02, 2) = %v", ids(mid))
	}
	none, err := s.ListPromotions(ctx, "", 0)
	if err != nil || len(none) != 0 {
		t.Fatalf("ListPromotions with limit 0 = %v, %v; want none", ids(none), err)
	}
}

func testClosePromotion(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("closing")
	mustCreate(t, s, p)
	first := time.Date(2026, 11, 21, 6, 0, 0, 1000, time.UTC)

	got, err := s.ClosePromotion(ctx, p.ID, first)
	if err != nil {
		t.Fatalf("ClosePromotion: %v", err)
	}
	p.ClosedAt = first
	equalPromotion(t, got, p)

	// Closing twice keeps the first time.
	got, err = s.ClosePromotion(ctx, p.ID, first.Add(time.Hour))
	if err != nil {
		t.Fatalf("second ClosePromotion: %v", err)
	}
	equalPromotion(t, got, p)
	got, err = s.GetPromotion(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	equalPromotion(t, got, p)

	if _, err := s.ClosePromotion(ctx, "missing", first); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ClosePromotion(missing): %v, want ErrNotFound", err)
	}
}

func testDrained(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("a"), promo("b"), promo("c"))
	undrained := func(want ...string) {
		t.Helper()
		ps, err := s.ListUndrained(ctx)
		if err != nil {
			t.Fatalf("ListUndrained: %v", err)
		}
		got := ids(ps)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("ListUndrained = %v, want %v", got, want)
		}
	}
	undrained("a", "b", "c")
	if err := s.SetDrained(ctx, "b", true); err != nil {
		t.Fatalf("SetDrained: %v", err)
	}
	undrained("a", "c")
	p, err := s.GetPromotion(ctx, "b")
	if err != nil || !p.Drained {
		t.Fatalf("GetPromotion(b) = %+v, %v; want drained", p, err)
	}
	// Setting it twice is harmless.
	if err := s.SetDrained(ctx, "b", true); err != nil {
		t.Fatalf("SetDrained again: %v", err)
	}
	if err := s.SetDrained(ctx, "b", false); err != nil {
		t.Fatalf("SetDrained(false): %v", err)
	}
	undrained("a", "b", "c")
	if err := s.SetDrained(ctx, "missing", true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetDrained(missing): %v, want ErrNotFound", err)
	}
}

// testRetire: drained_at counts from the first drain, a promotion is
// retirable once drained long enough, retiring keeps the first time, a
// retired one is listed again only if retired since the given time, and an
// undrained one cannot be retired.
func testRetire(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("r1"), promo("r2"), promo("r3"))
	t0 := now().Add(-time.Hour)
	for i, id := range []string{"r1", "r2"} {
		if err := s.MarkDrained(ctx, id, t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatalf("MarkDrained(%s): %v", id, err)
		}
	}
	// Marking again keeps the first time; SetDrained(true) too.
	if err := s.MarkDrained(ctx, "r1", t0.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDrained(ctx, "r1", true); err != nil {
		t.Fatal(err)
	}
	p, err := s.GetPromotion(ctx, "r1")
	if err != nil || !p.Drained || !p.DrainedAt.Equal(t0) || !p.RetiredAt.IsZero() {
		t.Fatalf("GetPromotion(r1) = drained %v at %v retired %v, %v; want drained at %v", p.Drained, p.DrainedAt, p.RetiredAt, err, t0)
	}
	list := func(before, since time.Time, limit int, want ...string) {
		t.Helper()
		ps, err := s.ListRetirable(ctx, before, since, limit)
		if err != nil {
			t.Fatalf("ListRetirable: %v", err)
		}
		if got := ids(ps); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("ListRetirable(%v, %v, %d) = %v, want %v", before, since, limit, got, want)
		}
	}
	far := t0.Add(-24 * time.Hour)
	list(t0.Add(-time.Second), far, 10)
	list(t0, far, 10, "r1")
	list(t0.Add(time.Hour), far, 10, "r1", "r2")
	list(t0.Add(time.Hour), far, 1, "r1")
	list(t0.Add(time.Hour), far, 0)

	at := t0.Add(2 * time.Hour)
	rp, err := s.RetirePromotion(ctx, "r1", at)
	if err != nil || !rp.RetiredAt.Equal(at) || !rp.Drained {
		t.Fatalf("RetirePromotion(r1) = retired %v, %v; want %v", rp.RetiredAt, err, at)
	}
	if rp, err = s.RetirePromotion(ctx, "r1", at.Add(time.Hour)); err != nil || !rp.RetiredAt.Equal(at) {
		t.Fatalf("RetirePromotion(r1) again = retired %v, %v; want the first time %v", rp.RetiredAt, err, at)
	}
	// Retired since the given time: listed again (an unfinished retirement
	// is found); retired before it: not.
	list(t0.Add(time.Hour), at, 10, "r2", "r1") // the unretired first
	list(t0.Add(time.Hour), at, 1, "r2")
	list(t0.Add(time.Hour), at.Add(time.Microsecond), 10, "r2")

	if _, err := s.RetirePromotion(ctx, "r3", at); !errors.Is(err, store.ErrNotRetirable) {
		t.Fatalf("RetirePromotion(undrained) = %v, want ErrNotRetirable", err)
	}
	if p, _ := s.GetPromotion(ctx, "r3"); !p.RetiredAt.IsZero() {
		t.Fatalf("undrained promotion got retired at %v", p.RetiredAt)
	}
	if _, err := s.RetirePromotion(ctx, "missing", at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RetirePromotion(missing) = %v, want ErrNotFound", err)
	}
	// A retired promotion stays drained.
	if err := s.SetDrained(ctx, "r1", false); !errors.Is(err, store.ErrRetired) {
		t.Fatalf("SetDrained(retired, false) = %v, want ErrRetired", err)
	}
	if p, _ := s.GetPromotion(ctx, "r1"); !p.Drained {
		t.Fatal("retired promotion marked undrained")
	}
	// Undrained again, DrainedAt is cleared.
	if err := s.SetDrained(ctx, "r2", false); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.GetPromotion(ctx, "r2"); p.Drained || !p.DrainedAt.IsZero() {
		t.Fatalf("undrained r2: drained %v at %v", p.Drained, p.DrainedAt)
	}
	if err := s.MarkDrained(ctx, "missing", at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("MarkDrained(missing) = %v, want ErrNotFound", err)
	}
}

func testIssueBatchInserted(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("ins"))
	at := now().Add(-time.Minute)
	batch := []store.Issue{
		issue("ins", 1, "alice", 1, at),
		issue("ins", 2, "bob", 1, at.Add(time.Millisecond)),
		issue("ins", 3, "alice", 2, at.Add(2*time.Millisecond)),
	}
	before := now()
	out, err := s.IssueBatch(ctx, batch)
	if err != nil {
		t.Fatalf("IssueBatch: %v", err)
	}
	after := now().Add(time.Second)
	want := []store.Outcome{store.Inserted, store.Inserted, store.Inserted}
	if !slices.Equal(out, want) {
		t.Fatalf("outcomes %v, want %v", out, want)
	}

	rows, err := s.ListIssued(ctx, "ins", "alice")
	if err != nil {
		t.Fatalf("ListIssued: %v", err)
	}
	if len(rows) != 2 {
		t.Fatalf("alice has %d issued rows, want 2: %+v", len(rows), rows)
	}
	for i, is := range []store.Issue{batch[0], batch[2]} {
		r := rows[i]
		if r.ClaimID != is.ClaimID || r.PromotionID != is.PromotionID || r.UserID != is.UserID ||
			r.Rank != is.Rank || r.Slot != is.Slot || !r.AcceptedAt.Equal(is.AcceptedAt) {
			t.Errorf("row %d = %+v, want %+v", i, r, is)
		}
		if r.IssuedAt.Before(before.Add(-time.Second)) || r.IssuedAt.After(after) {
			t.Errorf("row %d IssuedAt = %v, want between %v and %v", i, r.IssuedAt, before, after)
		}
		if r.AcceptedAt.Location() != time.UTC || r.IssuedAt.Location() != time.UTC {
			t.Errorf("row %d times not in UTC: %+v", i, r)
		}
	}
	if rows, err := s.ListIssued(ctx, "ins", "nobody"); err != nil || len(rows) != 0 {
		t.Fatalf("ListIssued(nobody) = %+v, %v; want none", rows, err)
	}
	c, err := s.Counts(ctx, "ins")
	if err != nil {
		t.Fatal(err)
	}
	if c != (store.Counts{Issued: 3}) {
		t.Fatalf("Counts = %+v, want 3 issued", c)
	}

	out, err = s.IssueBatch(ctx, nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("IssueBatch(nil) = %v, %v; want no outcomes", out, err)
	}
}

func testIssueBatchOutcomes(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("out"), promo("other"))
	at := now()
	existing := []store.Issue{
		issue("out", 1, "alice", 1, at),
		issue("out", 2, "bob", 1, at),
	}
	if out, err := s.IssueBatch(ctx, existing); err != nil || !slices.Equal(out, []store.Outcome{store.Inserted, store.Inserted}) {
		t.Fatalf("seed batch: %v, %v", out, err)
	}

	sameRank := issue("out", 1, "carol", 1, at)
	sameRank.ClaimID = "out#other-1" // another claim holding rank 1
	sameSlot := issue("out", 10, "bob", 1, at)
	changed := issue("out", 2, "bob", 2, at) // claim out#2 with another slot
	redelivered := existing[0]
	redelivered.AcceptedAt = at.Add(time.Second) // the time is not the claim's identity
	fresh := issue("out", 3, "dave", 1, at)
	inBatchRank := issue("out", 3, "erin", 1, at)
	inBatchRank.ClaimID = "out#other-3" // rank 3 taken earlier in this batch
	otherPromo := issue("other", 1, "alice", 1, at)

	tests := []struct {
		name  string
		issue store.Issue
		want  store.Outcome
	}{
		{"redelivery", redelivered, store.Duplicate},
		{"rank held by another claim", sameRank, store.Conflict},
		{"user slot held by another claim", sameSlot, store.Conflict},
		{"same claim other content", changed, store.Conflict},
		{"new", fresh, store.Inserted},
		{"repeated in the batch", fresh, store.Duplicate},
		{"rank taken earlier in the batch", inBatchRank, store.Conflict},
		{"same rank in another promotion", otherPromo, store.Inserted},
	}
	batch := make([]store.Issue, len(tests))
	for i, tt := range tests {
		batch[i] = tt.issue
	}
	out, err := s.IssueBatch(ctx, batch)
	if err != nil {
		t.Fatalf("IssueBatch: %v", err)
	}
	if len(out) != len(tests) {
		t.Fatalf("%d outcomes for %d issues", len(out), len(tests))
	}
	for i, tt := range tests {
		if out[i] != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, out[i], tt.want)
		}
	}

	// Nothing but the inserted rows was written, and the held rows are unchanged.
	c, err := s.Counts(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	if c.Issued != 3 {
		t.Fatalf("Counts.Issued = %d, want 3", c.Issued)
	}
	rows, err := s.ListIssued(ctx, "out", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ClaimID != "out#2" || rows[0].Slot != 1 {
		t.Fatalf("bob's rows = %+v, want only out#2 in slot 1", rows)
	}
	rows, err = s.ListIssued(ctx, "out", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !rows[0].AcceptedAt.Equal(at) {
		t.Fatalf("alice's rows = %+v, want the first delivery's", rows)
	}

	// A whole batch of redeliveries is all duplicates.
	out, err = s.IssueBatch(ctx, existing)
	if err != nil || !slices.Equal(out, []store.Outcome{store.Duplicate, store.Duplicate}) {
		t.Fatalf("redelivered batch: %v, %v; want duplicates", out, err)
	}
}

// testIssueBatchLarge crosses the backends' statement chunking.
func testIssueBatchLarge(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("large"))
	const n = 2500
	at := now()
	batch := make([]store.Issue, 0, n)
	for r := int64(1); r <= n; r++ {
		batch = append(batch, issue("large", r, fmt.Sprintf("u%d", r), 1, at))
	}
	// Half of them already issued, scattered over the chunks.
	var half []store.Issue
	for i := 0; i < n; i += 2 {
		half = append(half, batch[i])
	}
	if _, err := s.IssueBatch(ctx, half); err != nil {
		t.Fatalf("first half: %v", err)
	}
	out, err := s.IssueBatch(ctx, batch)
	if err != nil {
		t.Fatalf("IssueBatch of %d: %v", n, err)
	}
	for i, o := range out {
		want := store.Inserted
		if i%2 == 0 {
			want = store.Duplicate
		}
		if o != want {
			t.Fatalf("issue %d: %s, want %s", i, o, want)
		}
	}
	c, err := s.Counts(ctx, "large")
	if err != nil {
		t.Fatal(err)
	}
	if c.Issued != n {
		t.Fatalf("Counts.Issued = %d, want %d", c.Issued, n)
	}
}

// testIssueBatchConcurrent has 16 writers issue overlapping batches of the
// same claims in different orders: each claim must be inserted exactly once.
func testIssueBatchConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("conc"))
	const (
		writers = 16
		claims  = 400
		batch   = 25
	)
	at := now()
	all := make([]store.Issue, claims)
	for i := range all {
		all[i] = issue("conc", int64(i+1), fmt.Sprintf("u%d", i%200), i/200+1, at)
	}

	var (
		wg   sync.WaitGroup
		tl   = newTally()
		errs = make([]error, writers)
	)
	for w := range writers {
		// Each writer covers every claim, starting at a different place, in
		// batches that overlap other writers' batches.
		order := slices.Clone(all)
		rnd := rand.New(rand.NewPCG(uint64(w), 7))
		rnd.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		wg.Go(func() {
			for start := 0; start < len(order); start += batch {
				b := order[start:min(start+batch, len(order))]
				out, err := s.IssueBatch(ctx, b)
				if err == nil {
					err = tl.add(b, out)
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	tl.check(t, claims)
	if want := claims*writers - claims; tl.dups != want {
		t.Errorf("%d duplicates, want %d", tl.dups, want)
	}
	c, err := s.Counts(ctx, "conc")
	if err != nil {
		t.Fatal(err)
	}
	if c.Issued != claims {
		t.Fatalf("Counts.Issued = %d, want %d", c.Issued, claims)
	}
}

func deadLetter(promotionID, claim string, rank int64, at time.Time) store.DeadLetter {
	return store.DeadLetter{
		ClaimID:     claim,
		PromotionID: promotionID,
		UserID:      "user-" + claim,
		Rank:        rank,
		Slot:        1,
		Reason:      "handler failed",
		Deliveries:  5,
		State:       store.DeadFailed,
		At:          at,
		Fields: map[string]string{
			"claim_id": claim, "user": "user-" + claim,
			"rank": fmt.Sprint(rank), "slot": "1", "at": "1764000000000",
		},
	}
}

// deadLetterOf is the dead letter of the claim is: a claim that was
// dead-lettered and issued, in either order, under one claim id.
func deadLetterOf(is store.Issue, at time.Time) store.DeadLetter {
	d := deadLetter(is.PromotionID, is.ClaimID, is.Rank, at)
	d.UserID, d.Slot = is.UserID, is.Slot
	d.Fields["user"], d.Fields["slot"] = is.UserID, fmt.Sprint(is.Slot)
	return d
}

func equalDeadLetters(t *testing.T, what string, got, want []store.DeadLetter) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d dead letters %v, want %d", what, len(got), claimIDs(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.At.Equal(w.At) || g.At.Location() != time.UTC {
			t.Errorf("%s[%d].At = %v, want %v in UTC", what, i, g.At, w.At)
		}
		g.At, w.At = time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s[%d]:\n got %+v\nwant %+v", what, i, g, w)
		}
	}
}

func claimIDs(ds []store.DeadLetter) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ClaimID
	}
	return out
}

func testDeadLetters(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := now()
	a, b, c := deadLetter("dl", "dl#1", 1, at), deadLetter("dl", "dl#2", 2, at), deadLetter("dl", "dl#3", 3, at)
	c.Fields = nil // a malformed entry may have nothing worth keeping
	for _, d := range []store.DeadLetter{c, a, b, deadLetter("dl-other", "dl-other#1", 1, at)} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatalf("RecordDeadLetter(%s): %v", d.ClaimID, err)
		}
	}
	list := func() []store.DeadLetter {
		t.Helper()
		ds, err := s.ListDeadLetters(ctx, "dl", "", 100)
		if err != nil {
			t.Fatalf("ListDeadLetters: %v", err)
		}
		return ds
	}
	equalDeadLetters(t, "recorded", list(), []store.DeadLetter{a, b, c})

	// Recording again updates reason, deliveries and time, keeping one row.
	a.Reason, a.Deliveries, a.At = "timeout", 7, at.Add(time.Minute)
	if err := s.RecordDeadLetter(ctx, a); err != nil {
		t.Fatal(err)
	}
	equalDeadLetters(t, "re-recorded", list(), []store.DeadLetter{a, b, c})

	// Replay a: it leaves the failed list.
	moved, err := s.TransitionDeadLetters(ctx, "dl", []string{"dl#1", "dl#missing"}, store.DeadReplayed)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	a.State = store.DeadReplayed
	equalDeadLetters(t, "replayed", moved, []store.DeadLetter{a})
	equalDeadLetters(t, "after replay", list(), []store.DeadLetter{b, c})

	// Replaying it again moves nothing.
	moved, err = s.TransitionDeadLetters(ctx, "dl", []string{"dl#1"}, store.DeadReplayed)
	if err != nil || len(moved) != 0 {
		t.Fatalf("second replay moved %v, %v; want none", claimIDs(moved), err)
	}

	// The replayed claim fails again: back to failed.
	a.State, a.Reason, a.Deliveries = store.DeadFailed, "failed again", 5
	if err := s.RecordDeadLetter(ctx, a); err != nil {
		t.Fatal(err)
	}
	equalDeadLetters(t, "failed again", list(), []store.DeadLetter{a, b, c})

	// Void b: it stays voided even when recorded again.
	moved, err = s.TransitionDeadLetters(ctx, "dl", []string{"dl#2"}, store.DeadVoided)
	if err != nil {
		t.Fatalf("void: %v", err)
	}
	b.State = store.DeadVoided
	equalDeadLetters(t, "voided", moved, []store.DeadLetter{b})
	again := b
	again.State, again.Reason = store.DeadFailed, "late failure"
	if err := s.RecordDeadLetter(ctx, again); err != nil {
		t.Fatal(err)
	}
	equalDeadLetters(t, "after recording a voided claim", list(), []store.DeadLetter{a, c})
	if moved, err := s.TransitionDeadLetters(ctx, "dl", []string{"dl#2"}, store.DeadReplayed); err != nil || len(moved) != 0 {
		t.Fatalf("replaying a voided claim moved %v, %v; want none", claimIDs(moved), err)
	}

	// An empty list moves nothing; nil moves every failed claim of the promotion.
	if moved, err := s.TransitionDeadLetters(ctx, "dl", []string{}, store.DeadVoided); err != nil || len(moved) != 0 {
		t.Fatalf("empty claim list moved %v, %v; want none", claimIDs(moved), err)
	}
	moved, err = s.TransitionDeadLetters(ctx, "dl", nil, store.DeadReplayed)
	if err != nil {
		t.Fatalf("replay all: %v", err)
	}
	a.State, c.State = store.DeadReplayed, store.DeadReplayed
	equalDeadLetters(t, "replay all", moved, []store.DeadLetter{a, c})
	equalDeadLetters(t, "after replay all", list(), nil)

	// The other promotion was not touched.
	other, err := s.ListDeadLetters(ctx, "dl-other", "", 10)
	if err != nil || len(other) != 1 {
		t.Fatalf("other promotion's dead letters = %v, %v; want 1", claimIDs(other), err)
	}

	for _, to := range []string{store.DeadFailed, "", "bogus"} {
		if _, err := s.TransitionDeadLetters(ctx, "dl-other", nil, to); err == nil {
			t.Errorf("TransitionDeadLetters to %q: no error", to)
		}
	}
	if other, _ := s.ListDeadLetters(ctx, "dl-other", "", 10); len(other) != 1 {
		t.Fatalf("a rejected transition moved claims: %v", claimIDs(other))
	}
}

func testDeadLettersPaging(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := now()
	var want []string
	for i := range 10 {
		d := deadLetter("page", fmt.Sprintf("page#%02d", i), int64(i), at)
		want = append(want, d.ClaimID)
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	after := ""
	for range 20 {
		ds, err := s.ListDeadLetters(ctx, "page", after, 4)
		if err != nil {
			t.Fatalf("ListDeadLetters: %v", err)
		}
		if len(ds) > 4 {
			t.Fatalf("page of %d, limit 4", len(ds))
		}
		if len(ds) == 0 {
			break
		}
		got = append(got, claimIDs(ds)...)
		after = ds[len(ds)-1].ClaimID
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	if ds, err := s.ListDeadLetters(ctx, "page", "", 0); err != nil || len(ds) != 0 {
		t.Fatalf("limit 0 gave %v, %v; want none", claimIDs(ds), err)
	}
}

// testDeadLetterMismatch records dead letters under claim ids the database
// holds for other claims (a claim id reused after Redis lost writes): each
// is refused with ErrClaimMismatch and nothing is written, whether the
// stored claim is a failed, voided or issued one; the same claim is
// recorded as usual.
func testDeadLetterMismatch(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("dm"))
	at := now()
	failed, voided := deadLetter("dm", "dm#1", 1, at), deadLetter("dm", "dm#2", 2, at)
	issued := issue("dm", 3, "c", 1, at)
	for _, d := range []store.DeadLetter{failed, voided} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TransitionDeadLetters(ctx, "dm", []string{"dm#2"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	if _, err := s.IssueBatch(ctx, []store.Issue{issued}); err != nil {
		t.Fatal(err)
	}
	voided.State = store.DeadVoided

	others := func(d store.DeadLetter) map[string]store.DeadLetter {
		d.Reason, d.Deliveries, d.At = "another claim", 9, at.Add(time.Minute)
		d.Fields = map[string]string{"claim_id": d.ClaimID, "user": "intruder"}
		user, rank, slot, promotion := d, d, d, d
		user.UserID = "intruder"
		rank.Rank++
		slot.Slot++
		promotion.PromotionID = "dm-other"
		return map[string]store.DeadLetter{"user": user, "rank": rank, "slot": slot, "promotion": promotion}
	}
	for _, stored := range []store.DeadLetter{failed, voided, deadLetterOf(issued, at)} {
		for what, d := range others(stored) {
			err := s.RecordDeadLetter(ctx, d)
			if !errors.Is(err, store.ErrClaimMismatch) || errors.Is(err, store.ErrUnavailable) {
				t.Errorf("RecordDeadLetter(%s with another %s) = %v, want ErrClaimMismatch", d.ClaimID, what, err)
			}
		}
	}
	list := func(what string, want ...store.DeadLetter) {
		t.Helper()
		ds, err := s.ListDeadLetters(ctx, "dm", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		equalDeadLetters(t, what, ds, want)
	}
	list("after the refused claims", failed)
	if c, err := s.Counts(ctx, "dm"); err != nil || c != (store.Counts{Issued: 1, Failed: 1, Voided: 1}) {
		t.Fatalf("Counts = %+v, %v; want 1 issued, 1 failed, 1 voided", c, err)
	}
	if ds, err := s.ListDeadLetters(ctx, "dm-other", "", 10); err != nil || len(ds) != 0 {
		t.Fatalf("dead letters of dm-other = %v, %v; want none", claimIDs(ds), err)
	}

	// The same claims are recorded as before: the failed one updated, the
	// voided one left voided, the issued one dead-lettered as well.
	failed.Reason, failed.Deliveries = "failed again", 6
	sameVoided := voided
	sameVoided.State = store.DeadFailed
	issuedDead := deadLetterOf(issued, at)
	for _, d := range []store.DeadLetter{failed, sameVoided, issuedDead} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatalf("RecordDeadLetter(%s), the same claim: %v", d.ClaimID, err)
		}
	}
	list("after the same claims", failed, issuedDead)
}

// testTransitionConcurrent races replays against voids over the same
// claims: every claim must be moved exactly once in total.
func testTransitionConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 200
	at := now()
	var all []string
	for i := range n {
		d := deadLetter("race", fmt.Sprintf("race#%03d", i), int64(i+1), at)
		all = append(all, d.ClaimID)
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	const callers = 8
	var (
		wg    sync.WaitGroup
		moved = make([][]store.DeadLetter, callers)
		errs  = make([]error, callers)
	)
	for c := range callers {
		to := store.DeadReplayed
		if c%2 == 1 {
			to = store.DeadVoided
		}
		var claims []string // half the callers name the claims, half take all
		if c%4 < 2 {
			claims = slices.Clone(all)
			rnd := rand.New(rand.NewPCG(uint64(c), 11))
			rnd.Shuffle(len(claims), func(i, j int) { claims[i], claims[j] = claims[j], claims[i] })
			claims = claims[:n*3/4]
		}
		wg.Go(func() {
			moved[c], errs[c] = s.TransitionDeadLetters(ctx, "race", claims, to)
			for _, d := range moved[c] {
				if d.State != to {
					errs[c] = errors.Join(errs[c], fmt.Errorf("%s moved to %s, reported as %s", d.ClaimID, to, d.State))
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, ds := range moved {
		for _, d := range ds {
			if prev, ok := seen[d.ClaimID]; ok {
				t.Errorf("claim %s moved twice (%s, then %s)", d.ClaimID, prev, d.State)
			}
			seen[d.ClaimID] = d.State
		}
	}
	if len(seen) != n {
		t.Fatalf("%d claims moved, want %d", len(seen), n)
	}
	voided := 0
	for _, st := range seen {
		if st == store.DeadVoided {
			voided++
		}
	}
	c, err := s.Counts(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	if c != (store.Counts{Voided: int64(voided)}) {
		t.Fatalf("Counts = %+v, want %d voided and nothing failed", c, voided)
	}
}

// testUnappliedDeadLetters follows moved dead letters until their side
// effect is recorded: listed oldest move first across promotions, bounded
// by movedBefore and limit, and gone once applied or failed again.
func testUnappliedDeadLetters(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := now()
	d1, d2, d3, d4 := deadLetter("ua", "ua#1", 1, at), deadLetter("ua", "ua#2", 2, at),
		deadLetter("ua", "ua#3", 3, at), deadLetter("ua", "ua#4", 4, at)
	other := deadLetter("ua-other", "ua-other#1", 1, at)
	for _, d := range []store.DeadLetter{d1, d2, d3, d4, other} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatalf("RecordDeadLetter(%s): %v", d.ClaimID, err)
		}
	}
	list := func(movedBefore time.Time, limit int) []store.DeadLetter {
		t.Helper()
		ds, err := s.ListUnappliedDeadLetters(ctx, movedBefore, limit)
		if err != nil {
			t.Fatalf("ListUnappliedDeadLetters: %v", err)
		}
		return ds
	}
	later := func() time.Time { return time.Now().Add(time.Hour) }
	transition := func(promotionID string, claims []string, to string) {
		t.Helper()
		moved, err := s.TransitionDeadLetters(ctx, promotionID, claims, to)
		if err != nil || len(moved) != len(claims) {
			t.Fatalf("TransitionDeadLetters(%v, %s) moved %v, %v", claims, to, claimIDs(moved), err)
		}
	}
	equalDeadLetters(t, "recorded", list(later(), 100), nil)

	start := now()
	transition("ua", []string{"ua#3"}, store.DeadVoided)
	// Every later move is at or after mid; ua#3's was before it.
	mid := now()
	transition("ua", []string{"ua#1", "ua#2"}, store.DeadReplayed)
	transition("ua-other", []string{"ua-other#1"}, store.DeadVoided)
	d1.State, d2.State, d3.State, other.State = store.DeadReplayed, store.DeadReplayed, store.DeadVoided, store.DeadVoided

	// Oldest move first (ties by claim_id), both states, every promotion;
	// the still-failed ua#4 is not listed.
	equalDeadLetters(t, "unapplied", list(later(), 100), []store.DeadLetter{d3, d1, d2, other})
	equalDeadLetters(t, "limit 2", list(later(), 2), []store.DeadLetter{d3, d1})
	equalDeadLetters(t, "moved before mid", list(mid, 100), []store.DeadLetter{d3})
	equalDeadLetters(t, "moved before the first move", list(start, 100), nil)
	equalDeadLetters(t, "limit 0", list(later(), 0), nil)

	// Applied ones leave the list; unknown claims and an empty list are
	// ignored, and so is a claim named with another state than its own (a
	// late mark of an earlier transition).
	if err := s.MarkDeadLettersApplied(ctx, store.DeadReplayed, []string{"ua#1", "ua#3", "ua#missing"}); err != nil {
		t.Fatalf("MarkDeadLettersApplied: %v", err)
	}
	equalDeadLetters(t, "after applying replays ua#1 and ua#3", list(later(), 100), []store.DeadLetter{d3, d2, other})
	if err := s.MarkDeadLettersApplied(ctx, store.DeadVoided, []string{"ua#3"}); err != nil {
		t.Fatalf("MarkDeadLettersApplied: %v", err)
	}
	if err := s.MarkDeadLettersApplied(ctx, store.DeadVoided, nil); err != nil {
		t.Fatalf("MarkDeadLettersApplied(nil): %v", err)
	}
	equalDeadLetters(t, "after applying ua#1 and ua#3", list(later(), 100), []store.DeadLetter{d2, other})

	// A replayed claim that fails again has nothing pending; replayed once
	// more, it is pending again, as the newest move.
	d2.State, d2.Reason = store.DeadFailed, "failed again"
	if err := s.RecordDeadLetter(ctx, d2); err != nil {
		t.Fatal(err)
	}
	equalDeadLetters(t, "after ua#2 failed again", list(later(), 100), []store.DeadLetter{other})
	transition("ua", []string{"ua#2"}, store.DeadReplayed)
	d2.State = store.DeadReplayed
	equalDeadLetters(t, "after ua#2 was replayed again", list(later(), 100), []store.DeadLetter{other, d2})

	// Recording a voided claim again leaves it voided, its return to stock
	// still pending.
	late := other
	late.State, late.Reason = store.DeadFailed, "late failure"
	if err := s.RecordDeadLetter(ctx, late); err != nil {
		t.Fatal(err)
	}
	equalDeadLetters(t, "after recording a voided claim", list(later(), 100), []store.DeadLetter{other, d2})

	if err := s.MarkDeadLettersApplied(ctx, store.DeadReplayed, []string{"ua#2"}); err != nil {
		t.Fatalf("MarkDeadLettersApplied: %v", err)
	}
	if err := s.MarkDeadLettersApplied(ctx, store.DeadVoided, []string{"ua-other#1"}); err != nil {
		t.Fatalf("MarkDeadLettersApplied: %v", err)
	}
	equalDeadLetters(t, "all applied", list(later(), 100), nil)
	// Applying twice is harmless.
	if err := s.MarkDeadLettersApplied(ctx, store.DeadReplayed, []string{"ua#2"}); err != nil {
		t.Fatalf("MarkDeadLettersApplied again: %v", err)
	}
	if failed, err := s.ListDeadLetters(ctx, "ua", "", 10); err != nil || !slices.Equal(claimIDs(failed), []string{"ua#4"}) {
		t.Fatalf("failed dead letters = %v, %v; want [ua#4]", claimIDs(failed), err)
	}
}

// testIssueSkipsVoided: a claim an admin voided (its unit went back to
// stock) is never issued afterwards, even by a stray redelivery: it is a
// Conflict, and the other claims of the batch are issued as usual.
func testIssueSkipsVoided(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("iv"))
	at := now()
	d := deadLetter("iv", "iv#1", 1, at)
	d.UserID = "a"
	if err := s.RecordDeadLetter(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionDeadLetters(ctx, "iv", []string{"iv#1"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	outs, err := s.IssueBatch(ctx, []store.Issue{issue("iv", 1, "a", 1, at), issue("iv", 2, "b", 1, at)})
	if err != nil || !slices.Equal(outs, []store.Outcome{store.Conflict, store.Inserted}) {
		t.Fatalf("IssueBatch = %v, %v; want [conflict inserted]", outs, err)
	}
	if c, err := s.Counts(ctx, "iv"); err != nil || c != (store.Counts{Issued: 1, Voided: 1}) {
		t.Fatalf("Counts = %+v, %v; want 1 issued, 1 voided", c, err)
	}
}

// testVoidSkipsIssued dead-letters claims whose issue committed (its
// acknowledgement lost): voiding must skip them, or their unit would go back
// to stock while they hold it; replaying them is allowed.
func testVoidSkipsIssued(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("vi"))
	at := now()
	if _, err := s.IssueBatch(ctx, []store.Issue{issue("vi", 1, "a", 1, at), issue("vi", 3, "c", 1, at)}); err != nil {
		t.Fatal(err)
	}
	d1, d2, d3 := deadLetterOf(issue("vi", 1, "a", 1, at), at), deadLetter("vi", "vi#2", 2, at), deadLetterOf(issue("vi", 3, "c", 1, at), at)
	for _, d := range []store.DeadLetter{d1, d2, d3} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}

	moved, err := s.TransitionDeadLetters(ctx, "vi", []string{"vi#1", "vi#2"}, store.DeadVoided)
	if err != nil {
		t.Fatalf("void named: %v", err)
	}
	d2.State = store.DeadVoided
	equalDeadLetters(t, "void named", moved, []store.DeadLetter{d2})
	moved, err = s.TransitionDeadLetters(ctx, "vi", nil, store.DeadVoided)
	if err != nil || len(moved) != 0 {
		t.Fatalf("void all moved %v, %v; want none (both left are issued)", claimIDs(moved), err)
	}
	failed, err := s.ListDeadLetters(ctx, "vi", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	equalDeadLetters(t, "still failed", failed, []store.DeadLetter{d1, d3})
	// Listed for an admin, but their units are counted once, as issued.
	if c, err := s.Counts(ctx, "vi"); err != nil || c != (store.Counts{Issued: 2, Failed: 0, Voided: 1}) {
		t.Fatalf("Counts = %+v, %v; want 2 issued, 0 failed, 1 voided", c, err)
	}

	moved, err = s.TransitionDeadLetters(ctx, "vi", nil, store.DeadReplayed)
	if err != nil {
		t.Fatalf("replay all: %v", err)
	}
	d1.State, d3.State = store.DeadReplayed, store.DeadReplayed
	equalDeadLetters(t, "replay all", moved, []store.DeadLetter{d1, d3})
	pending, err := s.ListUnappliedDeadLetters(ctx, time.Now().Add(time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := claimIDs(pending); !slices.Equal(got, []string{"vi#2", "vi#1", "vi#3"}) {
		t.Fatalf("unapplied = %v, want [vi#2 vi#1 vi#3]", got)
	}
}

func testCounts(t *testing.T, s store.Store) {
	ctx := t.Context()
	c, err := s.Counts(ctx, "unknown")
	if err != nil || c != (store.Counts{}) {
		t.Fatalf("Counts(unknown) = %+v, %v; want zeros", c, err)
	}
	mustCreate(t, s, promo("cnt"))
	at := now()
	if _, err := s.IssueBatch(ctx, []store.Issue{issue("cnt", 1, "a", 1, at), issue("cnt", 2, "b", 1, at)}); err != nil {
		t.Fatal(err)
	}
	for i := 3; i <= 7; i++ {
		if err := s.RecordDeadLetter(ctx, deadLetter("cnt", fmt.Sprintf("cnt#%d", i), int64(i), at)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TransitionDeadLetters(ctx, "cnt", []string{"cnt#3", "cnt#4"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionDeadLetters(ctx, "cnt", []string{"cnt#5"}, store.DeadReplayed); err != nil {
		t.Fatal(err)
	}
	// A collision's dead letter shares rank 2 with b's issued row: it holds
	// no unit of its own, failed or voided.
	for _, id := range []string{"cnt#2~z", "cnt#2~y"} {
		if err := s.RecordDeadLetter(ctx, deadLetter("cnt", id, 2, at)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TransitionDeadLetters(ctx, "cnt", []string{"cnt#2~y"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	c, err = s.Counts(ctx, "cnt")
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Counts{Issued: 2, Failed: 2, Voided: 2}); c != want {
		t.Fatalf("Counts = %+v, want %+v", c, want)
	}
}

func testMaxRanks(t *testing.T, s store.Store) {
	ctx := t.Context()
	if m, err := s.MaxRanks(ctx, nil); err != nil || len(m) != 0 {
		t.Fatalf("MaxRanks(nil) = %v, %v; want empty", m, err)
	}
	mustCreate(t, s, promo("mr-issued"), promo("mr-dead"), promo("mr-only-dead"), promo("mr-empty"))
	at := now()
	if _, err := s.IssueBatch(ctx, []store.Issue{
		issue("mr-issued", 1, "a", 1, at), issue("mr-issued", 5, "b", 1, at), issue("mr-issued", 2, "c", 1, at),
		issue("mr-dead", 1, "a", 1, at), issue("mr-dead", 3, "b", 1, at),
	}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []store.DeadLetter{
		deadLetter("mr-dead", "mr-dead#9", 9, at),
		deadLetter("mr-only-dead", "mr-only-dead#4", 4, at),
		deadLetter("mr-only-dead", "mr-only-dead!0-1", 0, at), // undecodable: no rank
	} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	// A voided dead letter still holds its rank: the counter must stay above it.
	if _, err := s.TransitionDeadLetters(ctx, "mr-dead", nil, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	got, err := s.MaxRanks(ctx, []string{"mr-issued", "mr-dead", "mr-only-dead", "mr-empty", "mr-unknown"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"mr-issued": 5, "mr-dead": 9, "mr-only-dead": 4, "mr-empty": 0, "mr-unknown": 0}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MaxRanks = %v, want %v", got, want)
	}
}

func testClaimsByRank(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("kc"), promo("kc-other"))
	at := now()
	if _, err := s.IssueBatch(ctx, []store.Issue{
		issue("kc", 1, "a", 1, at), issue("kc", 2, "b", 1, at), issue("kc", 4, "a", 2, at),
		issue("kc-other", 3, "z", 1, at),
	}); err != nil {
		t.Fatal(err)
	}
	failed := deadLetter("kc", "kc#3", 3, at.Add(time.Second))
	redone := deadLetterOf(issue("kc", 4, "a", 2, at), at) // dead-lettered, replayed, then issued
	voided := deadLetter("kc", "kc#5", 5, at)
	replayed := deadLetter("kc", "kc#6", 6, at.Add(2*time.Second))
	for _, d := range []store.DeadLetter{failed, redone, voided, replayed, deadLetter("kc", "kc!0-1", 0, at)} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TransitionDeadLetters(ctx, "kc", []string{"kc#4", "kc#6"}, store.DeadReplayed); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionDeadLetters(ctx, "kc", []string{"kc#5"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}

	all, err := s.ClaimsByRank(ctx, "kc", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		claimID, user, state string
		rank                 int64
		slot                 int
		fields               bool
	}
	want := []row{
		{"kc#1", "a", store.StateIssued, 1, 1, false},
		{"kc#2", "b", store.StateIssued, 2, 1, false},
		{"kc#3", "user-kc#3", store.DeadFailed, 3, 1, true},
		{"kc#4", "a", store.StateIssued, 4, 2, false},
		{"kc#5", "user-kc#5", store.DeadVoided, 5, 1, true},
		{"kc#6", "user-kc#6", store.DeadReplayed, 6, 1, true},
	}
	if len(all) != len(want) {
		t.Fatalf("ClaimsByRank = %+v, want %d claims", all, len(want))
	}
	for i, c := range all {
		g := row{c.ClaimID, c.UserID, c.State, c.Rank, c.Slot, c.Fields != nil}
		if g != want[i] {
			t.Errorf("claim %d = %+v, want %+v", i, g, want[i])
		}
		if c.At.Location() != time.UTC {
			t.Errorf("claim %s: At %v not in UTC", c.ClaimID, c.At)
		}
	}
	if !all[2].At.Equal(failed.At) || !all[5].At.Equal(replayed.At) {
		t.Errorf("dead letters' At = %v, %v; want %v, %v", all[2].At, all[5].At, failed.At, replayed.At)
	}
	if !reflect.DeepEqual(all[5].Fields, replayed.Fields) {
		t.Errorf("replayed claim's fields = %v, want %v", all[5].Fields, replayed.Fields)
	}
	if all[0].At.Before(at.Add(-time.Minute)) || all[0].At.After(time.Now().Add(time.Minute)) {
		t.Errorf("issued row's At = %v, want about now", all[0].At)
	}

	rest, err := s.ClaimsByRank(ctx, "kc", 4, 100)
	if err != nil || len(rest) != 2 || rest[0].Rank != 5 || rest[1].Rank != 6 {
		t.Fatalf("after rank 4: %+v, %v; want ranks 5 and 6", rest, err)
	}
	if none, err := s.ClaimsByRank(ctx, "kc", 6, 100); err != nil || len(none) != 0 {
		t.Fatalf("after the last rank: %+v, %v; want none", none, err)
	}
	if none, err := s.ClaimsByRank(ctx, "kc", 0, 0); err != nil || len(none) != 0 {
		t.Fatalf("limit 0: %+v, %v; want none", none, err)
	}
	if none, err := s.ClaimsByRank(ctx, "kc-unknown", 0, 10); err != nil || len(none) != 0 {
		t.Fatalf("unknown promotion: %+v, %v; want none", none, err)
	}
}

// testClaimsByRankPaging walks a promotion of a few thousand claims, dead
// letters interleaved, in small pages: every rank once, in order.
func testClaimsByRankPaging(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("kp"))
	const n = 2500
	at := now()
	var batch []store.Issue
	for r := int64(1); r <= n; r++ {
		if r%97 == 0 {
			if err := s.RecordDeadLetter(ctx, deadLetter("kp", fmt.Sprintf("kp#%d", r), r, at)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		batch = append(batch, issue("kp", r, fmt.Sprintf("u%d", r), 1, at))
	}
	// Issue in shuffled order: rank order must come from the query, not insertion.
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	if _, err := s.IssueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var (
		after int64
		pages int
	)
	for {
		page, err := s.ClaimsByRank(ctx, "kp", after, 300)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 300 {
			t.Fatalf("page of %d, limit 300", len(page))
		}
		pages++
		for _, c := range page {
			if c.Rank != after+1 {
				t.Fatalf("rank %d after %d: a rank was skipped or repeated", c.Rank, after)
			}
			wantState := store.StateIssued
			if c.Rank%97 == 0 {
				wantState = store.DeadFailed
			}
			if c.State != wantState {
				t.Fatalf("rank %d state %s, want %s", c.Rank, c.State, wantState)
			}
			after = c.Rank
		}
	}
	if after != n || pages != (n+299)/300 {
		t.Fatalf("walked to rank %d in %d pages, want %d in %d", after, pages, n, (n+299)/300)
	}
}

// testCountsSkipNonClaims: a dead letter of an entry that was no claim
// (undecodable, rank 0) is listed but not counted: it holds no unit.
func testCountsSkipNonClaims(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := now()
	garbage := deadLetter("nc", "nc!1-0", 0, at)
	claimed := deadLetter("nc", "nc#1", 1, at)
	for _, d := range []store.DeadLetter{garbage, claimed} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := s.Counts(ctx, "nc"); err != nil || c != (store.Counts{Failed: 1}) {
		t.Fatalf("Counts = %+v, %v; want 1 failed", c, err)
	}
	if ds, err := s.ListDeadLetters(ctx, "nc", "", 10); err != nil || len(ds) != 2 {
		t.Fatalf("ListDeadLetters = %v, %v; want both listed", claimIDs(ds), err)
	}
}
