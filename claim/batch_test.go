package claim_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// TestClaimBatchBesideTheClaimScript runs the same random sequence of
// claims (users, Idempotency-Keys, two claims of one user in a batch,
// claims past the last unit, voids between batches, and in the last batch
// a fence above the rank counter) on four copies of a promotion: one
// claimed by the claim script one claim at a time, one by the batch claim
// script a batch per call, one by Gate.ClaimFenced and one by
// Gate.ClaimBatch. Every answer, and afterwards every key of the promotion
// (its stream entries but for the times they carry), must be the same in
// all of them. It runs for both layouts and per-user limits of 1 and 2.
func TestClaimBatchBesideTheClaimScript(t *testing.T) {
	t.Parallel()
	tp := redistest.Topologies(t)[0]
	for _, l := range []claim.Layout{claim.LayoutCompact, claim.LayoutClassic} {
		for _, limit := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/limit=%d", l, limit), func(t *testing.T) {
				t.Parallel()
				batchBesideTheClaimScript(t, topo{Topology: tp, layout: l}, limit)
			})
		}
	}
}

func batchBesideTheClaimScript(t *testing.T, tp topo, limit int) {
	ctx := context.Background()
	one, batch := rueidis.NewLuaScript(claim.ClaimScriptSource()), rueidis.NewLuaScript(claim.ClaimBatchScriptSource)
	copies := make([]fixture, 4)
	const id, users = "batch", 12
	now := time.Now().Truncate(time.Millisecond)
	for i := range copies {
		copies[i] = setup(t, tp)
		copies[i].open(t, claim.Promotion{ID: id, Stock: 5, PerUserLimit: limit,
			StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)})
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	const batches = 40
	answers := map[string]int{}
	for n := 0; n < batches; n++ {
		asks := make([]claim.Ask, 1+r.IntN(12))
		for i := range asks {
			asks[i].UserID = "u" + strconv.Itoa(1+r.IntN(users))
			if r.IntN(3) == 0 {
				asks[i].IdemKey = "k" + strconv.Itoa(r.IntN(2))
			}
		}
		if n == 0 {
			// One user beyond the limit first, while stock remains: some
			// claim is already_claimed whatever the seed.
			for range limit + 1 {
				asks = append([]claim.Ask{{UserID: "u1"}}, asks...)
			}
		}
		if n == batches-1 { // Redis lost writes below a caller's fence
			asks[len(asks)/2].Fence = 1000
		}
		if r.IntN(3) == 0 {
			void := 1 + int64(r.IntN(8))
			for _, c := range copies {
				if _, _, err := c.gate.Void(ctx, id, void); err != nil {
					t.Fatal(err)
				}
			}
		}
		want := make([]string, len(asks))
		for i, a := range asks { // the claim script, one claim per call
			msg, err := one.Exec(ctx, copies[0].client, claim.ClaimScriptKeys(copies[0].prefix, id),
				[]string{a.UserID, a.IdemKey, id, strconv.FormatInt(a.Fence, 10)}).ToMessage()
			if err != nil {
				t.Fatal(err)
			}
			want[i] = claimAnswer(t, &msg)
			answers[strings.Fields(want[i])[0]]++
		}
		args := []string{id}
		for _, a := range asks {
			args = append(args, a.UserID, a.IdemKey, strconv.FormatInt(a.Fence, 10))
		}
		got, err := batch.Exec(ctx, copies[1].client, claim.ClaimScriptKeys(copies[1].prefix, id), args).ToArray()
		if err != nil || len(got) != len(asks) {
			t.Fatalf("batch %d: %d replies, %v", n, len(got), err)
		}
		for i := range got {
			if s := claimAnswer(t, &got[i]); s != want[i] {
				t.Fatalf("batch %d, claim %d (%+v): the batch script answered %q, the claim script %q", n, i, asks[i], s, want[i])
			}
		}
		compareGateBatch(t, copies[2], copies[3], id, n, asks)
	}
	t.Logf("answers %v", answers)
	if answers["ok"] == 0 || answers["already_claimed"] == 0 || answers["sold_out"] == 0 || answers["lost"] != 1 {
		t.Errorf("answers %v: want some accepted, already claimed and sold out, and one lost", answers)
	}
	want := copies[0].dump(t, id, false)
	for i, c := range copies[1:] {
		if got := c.dump(t, id, false); got != want {
			t.Errorf("copy %d holds\n%s\nthe claim script's copy\n%s", i+1, got, want)
		}
	}
}

// compareGateBatch runs asks through Gate.ClaimFenced one by one on alone
// and through Gate.ClaimBatch on batched, and fails unless every answer is
// the same but for the acceptance time.
func compareGateBatch(t *testing.T, alone, batched fixture, id string, n int, asks []claim.Ask) {
	t.Helper()
	ctx := context.Background()
	got, err := batched.gate.ClaimBatch(ctx, id, asks)
	if err != nil || len(got) != len(asks) {
		t.Fatalf("ClaimBatch %d: %d answers, %v", n, len(got), err)
	}
	for i, a := range asks {
		res, err := alone.gate.ClaimFenced(ctx, id, a.UserID, a.IdemKey, a.Fence)
		b := got[i]
		if (err == nil) != (b.Err == nil) || (err != nil && !sameOutcome(err, b.Err)) {
			t.Fatalf("batch %d, claim %d (%+v): ClaimBatch answered %v, ClaimFenced %v", n, i, a, b.Err, err)
		}
		if err == nil && (b.Result.AcceptedAt.IsZero() != res.AcceptedAt.IsZero()) {
			t.Fatalf("batch %d, claim %d: accepted at %v by ClaimBatch, %v by ClaimFenced", n, i, b.Result.AcceptedAt, res.AcceptedAt)
		}
		b.Result.AcceptedAt, res.AcceptedAt = time.Time{}, time.Time{}
		if b.Result != res {
			t.Fatalf("batch %d, claim %d (%+v): ClaimBatch %+v, ClaimFenced %+v", n, i, a, b.Result, res)
		}
	}
}

// sameOutcome reports whether two claim errors are the same sentinel.
func sameOutcome(a, b error) bool {
	for _, e := range []error{claim.ErrLost, claim.ErrRebuilding, claim.ErrSoldOut, claim.ErrAlreadyClaimed,
		claim.ErrVoided, claim.ErrEnded, claim.ErrNotFound, claim.ErrPaused, claim.ErrNotStarted, claim.ErrWrongMode} {
		if errors.Is(a, e) || errors.Is(b, e) {
			return errors.Is(a, e) && errors.Is(b, e)
		}
	}
	return a.Error() == b.Error()
}
