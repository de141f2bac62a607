package claim_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// TestSegmentsLayout checks the pure parts of a segment layout: slots,
// tags spread over the n-ths of the slot space, ranks, shares and the
// user → segment map.
func TestSegmentsLayout(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]uint16{"foo": 12182, "{user1000}.following": 3443, "a{}b": claim.KeySlot("a{}b")} {
		if got := claim.KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
	for _, n := range []int{1, 2, 3, 8, 32, 64} {
		s := claim.SegmentsOf("promo-"+strconv.Itoa(n), n)
		if s.N() != n || s.Tag(0) != s.ID() {
			t.Fatalf("n=%d: N %d, tag 0 %q", n, s.N(), s.Tag(0))
		}
		parts := map[int]bool{}
		for k := range n {
			parts[int(claim.KeySlot(s.Tag(k)))*n/16384] = true
		}
		if len(parts) != n {
			t.Errorf("n=%d: segments fall in %d of the %d parts of the slot space: %v", n, len(parts), n, s.Tags())
		}
		var total int64
		for k := range n {
			total += s.Share(k, 1001)
		}
		if total != 1001 {
			t.Errorf("n=%d: shares of 1001 sum to %d", n, total)
		}
		seen := map[int64]bool{}
		for k := range n {
			for local := int64(1); local <= 50; local++ {
				r := s.Rank(k, local)
				if seen[r] {
					t.Fatalf("n=%d: rank %d twice", n, r)
				}
				seen[r] = true
				if gk, gl := s.Segment(r); gk != k || gl != local {
					t.Fatalf("n=%d: Segment(%d) = %d, %d, want %d, %d", n, r, gk, gl, k, local)
				}
			}
		}
		if a, b := s.Of("user-42"), claim.SegmentsOf(s.ID(), n).Of("user-42"); a != b || a < 0 || a >= n {
			t.Errorf("n=%d: Of not stable or out of range: %d, %d", n, a, b)
		}
	}
	if s := claim.SegmentsOf("x", 65); s.N() != 1 {
		t.Errorf("SegmentsOf with 65 segments: N %d, want 1", s.N())
	}
}

// TestPlainClaimScriptUnchanged pins the hash of the one-segment claim
// script: a promotion without segments runs the plain claim script (claim
// v5), which segments leave alone; a change of it comes with a new version
// and a new hash here.
func TestPlainClaimScriptUnchanged(t *testing.T) {
	t.Parallel()
	sum := sha1.Sum([]byte(claim.ClaimScriptSource()))
	if got := hex.EncodeToString(sum[:]); got != "f46db383a2a890b04fd3f4b5c9c757e047f4586e" {
		t.Fatalf("claim script hash %s changed", got)
	}
}

// segFixture opens a promotion of n segments with stock on the Cluster.
func segFixture(t *testing.T, id string, n int, stock int64) (fixture, claim.Segments) {
	t.Helper()
	c := redistest.ClusterClient(t)
	p := redistest.Prefix(t)
	f := fixture{gate: newGate(t, c, p), client: c, prefix: p}
	s := claim.SegmentsOf(id, n)
	now := time.Now()
	made, err := f.gate.OpenSegments(context.Background(), claim.Promotion{ID: id, Stock: stock, PerUserLimit: 1,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)}, s, 0)
	if err != nil || len(made) != n {
		t.Fatalf("open segments: %v, made %v", err, made)
	}
	return f, s
}

// TestSegmentedClaims races 3,000 users (each twice) for 1,000 units in
// three segments on the three-master Cluster: exactly 1,000 accepted, no
// user twice, every rank once, and the promotion sold out only with every
// segment empty and nothing in flight — units moved to the segments that
// ran dry. It logs the refusals answered while units were left elsewhere.
func TestSegmentedClaims(t *testing.T) {
	t.Parallel()
	f, s := segFixture(t, "segs", 3, 1000)
	ctx := context.Background()
	// Every segment on its own master.
	masters := map[int]bool{}
	for k := range s.N() {
		masters[int(claim.KeySlot(s.Tag(k)))/5462] = true
	}
	if len(masters) != 3 {
		t.Fatalf("segments %v share a master", s.Tags())
	}
	const users = 3000
	type answer struct {
		user string
		res  claim.Result
		err  error
		at   time.Time
	}
	answers := make(chan answer, 2*users)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range users {
		for range 2 {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				u := "u" + strconv.Itoa(i)
				res, err := f.gate.ClaimSegmented(ctx, s, u, "")
				answers <- answer{u, res, err, time.Now()}
			})
		}
	}
	wg.Wait()
	close(answers)
	ranks := map[int64]string{}
	byUser := map[string]int{}
	var last time.Time
	var soldOut []time.Time
	for a := range answers {
		switch {
		case a.err == nil:
			if prev, dup := ranks[a.res.Rank]; dup {
				t.Fatalf("rank %d to %s and %s", a.res.Rank, prev, a.user)
			}
			ranks[a.res.Rank] = a.user
			byUser[a.user]++
			if k, _ := s.Segment(a.res.Rank); k != s.Of(a.user) {
				t.Fatalf("user %s of segment %d got rank %d of segment %d", a.user, s.Of(a.user), a.res.Rank, k)
			}
			if a.res.ClaimID != claim.ClaimID("segs", a.res.Rank) {
				t.Fatalf("claim id %s for rank %d", a.res.ClaimID, a.res.Rank)
			}
			if a.at.After(last) {
				last = a.at
			}
		case errors.Is(a.err, claim.ErrSoldOut):
			soldOut = append(soldOut, a.at)
		case errors.Is(a.err, claim.ErrAlreadyClaimed):
		default:
			t.Fatalf("claim for %s: %v", a.user, a.err)
		}
	}
	if len(ranks) != 1000 {
		t.Fatalf("%d accepted, want 1000", len(ranks))
	}
	for u, n := range byUser {
		if n > 1 {
			t.Fatalf("user %s accepted %d times, limit 1", u, n)
		}
	}
	early := 0
	for _, at := range soldOut {
		if at.Before(last) {
			early++
		}
	}
	t.Logf("sold_out answers: %d, of which %d before the last acceptance (units were left elsewhere)", len(soldOut), early)
	st, err := f.gate.SegmentStates(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for k, x := range st {
		if x.Remaining() != 0 || x.InFlight != 0 {
			t.Errorf("segment %d: remaining %d, in flight %d after selling out", k, x.Remaining(), x.InFlight)
		}
	}
	if sum := claim.SegmentsState(st); sum.Stock != 1000 || sum.Accepted() != 1000 {
		t.Errorf("promotion state %+v, want stock 1000 all accepted", sum)
	}
	if _, err := f.gate.ClaimSegmented(ctx, s, "late", ""); !errors.Is(err, claim.ErrSoldOut) {
		t.Fatalf("claim after selling out: %v, want ErrSoldOut", err)
	}
}

// TestSegmentTransferSettles breaks a transfer between its take and its
// give: the units are in flight (counted in the promotion's stock, not
// remaining anywhere), and settling gives them once however often it runs.
func TestSegmentTransferSettles(t *testing.T) {
	t.Parallel()
	f, s := segFixture(t, "xfer", 3, 30)
	ctx := context.Background()
	// The take step alone: what a process dying between the two leaves.
	src := f.gate.Keys(s.Tag(1))
	if err := f.client.Do(ctx, f.client.B().Hincrby().Key(src.Meta()).Field("stock").Increment(-4).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Do(ctx, f.client.B().Hset().Key(src.Transfers()).FieldValue().FieldValue("t1", "2:4").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	st, err := f.gate.SegmentStates(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if sum := claim.SegmentsState(st); sum.Stock != 30 || st[1].InFlight != 4 || st[1].Remaining() != 6 {
		t.Fatalf("with a transfer in flight: %+v / %+v", sum, st)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := f.gate.SettleTransfers(ctx, s); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := f.gate.SettleTransfers(ctx, s); err != nil {
		t.Fatal(err)
	}
	st, err = f.gate.SegmentStates(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if sum := claim.SegmentsState(st); sum.Stock != 30 || st[2].Stock != 14 || st[1].InFlight != 0 {
		t.Fatalf("after settling: %+v / %+v", sum, st)
	}
	// A live transfer moves half of the source's remaining units.
	n, err := f.gate.Transfer(ctx, s, 2, 0)
	if err != nil || n != 7 {
		t.Fatalf("transfer: %d, %v, want 7", n, err)
	}
	st, _ = f.gate.SegmentStates(ctx, s)
	if sum := claim.SegmentsState(st); sum.Stock != 30 || st[0].Stock != 17 {
		t.Fatalf("after a transfer: %+v / %+v", sum, st)
	}
}

// TestSegmentRefusesPlainClaims: a segment's meta is mode segment, so a
// plain claim or grant (an instance that does not know the promotion has
// segments) takes nothing.
func TestSegmentRefusesPlainClaims(t *testing.T) {
	t.Parallel()
	f, s := segFixture(t, "plain", 2, 10)
	ctx := context.Background()
	if _, err := f.gate.Claim(ctx, s.ID(), "u1", ""); !errors.Is(err, claim.ErrWrongMode) {
		t.Fatalf("plain claim on a segment: %v, want ErrWrongMode", err)
	}
	if _, err := f.gate.Grant(ctx, s.ID(), []string{"u1"}); !errors.Is(err, claim.ErrWrongMode) {
		t.Fatalf("grant on a segment: %v, want ErrWrongMode", err)
	}
	// Idempotent retries are answered from the user's segment.
	a, err := f.gate.ClaimSegmented(ctx, s, "u1", "k1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.gate.ClaimSegmented(ctx, s, "u1", "k1")
	if err != nil || !b.Replayed || b.Rank != a.Rank {
		t.Fatalf("retry: %+v, %v, want the original rank %d", b, err, a.Rank)
	}
	cs, err := f.gate.UserClaims(ctx, s.Tag(s.Of("u1")), "u1")
	if err != nil || len(cs) != 1 || cs[0].Rank != a.Rank {
		t.Fatalf("user claims in the user's segment: %+v, %v", cs, err)
	}
}
