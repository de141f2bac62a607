package claim_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// loseFrom makes Redis forget every claim of promotion id from rank from on.
func (f fixture) loseFrom(t *testing.T, id string, from int64) {
	t.Helper()
	redistest.LoseClaimsFrom(t, f.client, f.gate.Keys(id), from)
}

// rebuilt runs an empty rebuild of promotion p, as the Manager does after
// a loss: the database's claims would be merged in between.
func (f fixture) rebuilt(t *testing.T, p claim.Promotion) {
	t.Helper()
	ctx := context.Background()
	r, err := f.gate.BeginRebuild(ctx, p, "test", time.Minute)
	if err != nil {
		t.Fatalf("begin rebuild: %v", err)
	}
	if _, err := r.Resume(ctx, 0); err != nil {
		t.Fatalf("resume: %v", err)
	}
}

// after waits until Redis TIME is past at, in whole milliseconds: a
// rebuild resumed then counts as later than a loss found at at.
func (f fixture) after(t *testing.T, at time.Time) {
	t.Helper()
	wait.For(t, 5*time.Second, "Redis TIME past the loss", func() bool {
		now, err := f.client.Do(context.Background(), f.client.B().Time().Build()).AsIntSlice()
		return err == nil && len(now) == 2 && now[0]*1000+now[1]/1000 > at.UnixMilli()
	})
}

func outcomes(rs []claim.RequeueResult) []claim.RequeueOutcome {
	out := make([]claim.RequeueOutcome, len(rs))
	for i, r := range rs {
		out[i] = r.Outcome
		if r.Err != nil {
			out[i] = -1
		}
	}
	return out
}

func sameOutcomes(t *testing.T, what string, rs []claim.RequeueResult, want ...claim.RequeueOutcome) {
	t.Helper()
	got := outcomes(rs)
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, rs, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: %+v, want outcomes %v", what, rs, want)
		}
	}
}

// TestRequeue: claims Redis lost are put back by the instance that answered
// them — only on a promotion rebuilt after the loss (the first attempt
// marks it rebuilding), under their original rank, slot, claim id and
// Idempotency-Key, once: a second run adds nothing. A lost rank another
// claim took since is put back as a collision, and a re-ranked claim is
// left where it is.
func TestRequeue(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		p := promo("rq", 10, 1)
		f.open(t, p)
		var answered []claim.Unconfirmed
		for _, u := range []string{"u1", "u2", "u3", "u4"} {
			res, err := f.gate.Claim(ctx, "rq", u, "key-"+u)
			if err != nil {
				t.Fatal(err)
			}
			if res.AcceptedAt.IsZero() || time.Since(res.AcceptedAt) > time.Minute {
				t.Fatalf("claim of %s accepted at %v", u, res.AcceptedAt)
			}
			answered = append(answered, claim.Unconfirmed{Rank: res.Rank, UserID: u, Slot: res.Slot,
				AcceptedAt: res.AcceptedAt, IdemKey: "key-" + u})
		}
		if again, err := f.gate.Claim(ctx, "rq", "u1", "key-u1"); err != nil || !again.Replayed || !again.AcceptedAt.IsZero() {
			t.Fatalf("retry of u1: %+v, %v; want replayed with no acceptance time", again, err)
		}
		f.loseFrom(t, "rq", 3)
		lost := answered[2:]
		before := f.streamLen(t, "rq")

		// Not rebuilt since the loss: nothing is put back.
		rs := f.gate.Requeue(ctx, "rq", lost)
		sameOutcomes(t, "before a rebuild", rs, claim.RequeueLost, claim.RequeueNotTried)
		for i := range lost {
			lost[i].RebuiltAfter = rs[0].RebuiltAfter
		}
		r, err := f.gate.BeginRebuild(ctx, p, "test", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		sameOutcomes(t, "while rebuilding", f.gate.Requeue(ctx, "rq", lost), claim.RequeueRebuilding, claim.RequeueNotTried)
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
		f.after(t, rs[0].RebuiltAfter)
		f.rebuilt(t, p)

		sameOutcomes(t, "after the rebuild", f.gate.Requeue(ctx, "rq", lost), claim.Requeued, claim.Requeued)
		sameOutcomes(t, "a second time", f.gate.Requeue(ctx, "rq", lost), claim.RequeuePresent, claim.RequeuePresent)
		if n := f.streamLen(t, "rq"); n != before+2 {
			t.Fatalf("stream holds %d entries, want %d: one per claim put back", n, before+2)
		}
		k := f.gate.Keys("rq")
		if seq, err := f.client.Do(ctx, f.client.B().Get().Key(k.Seq()).Build()).AsInt64(); err != nil || seq != 4 {
			t.Fatalf("rank counter %d (%v) after the requeue, want 4", seq, err)
		}
		for _, c := range lost {
			r := strconv.FormatInt(c.Rank, 10)
			if s := f.status(t, "rq", r); s != "p" {
				t.Errorf("status of rank %s: %q, want p", r, s)
			}
			if l := f.hget(t, k.ByUser(), c.UserID); l != r {
				t.Errorf("ranks of %s: %q, want %s", c.UserID, l, r)
			}
			if _, err := f.gate.Claim(ctx, "rq", c.UserID, ""); !errors.Is(err, claim.ErrAlreadyClaimed) {
				t.Errorf("new claim of %s: %v, want ErrAlreadyClaimed", c.UserID, err)
			}
			if res, err := f.gate.Claim(ctx, "rq", c.UserID, c.IdemKey); err != nil || !res.Replayed || res.Rank != c.Rank {
				t.Errorf("retry of %s: %+v, %v; want its original rank %d", c.UserID, res, err, c.Rank)
			}
		}
		entries, err := f.client.Do(ctx, f.client.B().Xrange().Key(k.Stream()).Start("-").End("+").Build()).AsXRange()
		if err != nil {
			t.Fatal(err)
		}
		last := entries[len(entries)-1].FieldValues
		want := map[string]string{"claim_id": "rq#4", "user": "u4", "rank": "4", "slot": "1",
			"at": strconv.FormatInt(lost[1].AcceptedAt.UnixMilli(), 10)}
		for f, v := range want {
			if last[f] != v {
				t.Errorf("entry put back: %v, want %v", last, want)
				break
			}
		}
		if res, err := f.gate.Claim(ctx, "rq", "n1", ""); err != nil || res.Rank != 5 {
			t.Fatalf("claim after the requeue: %+v, %v; want rank 5", res, err)
		}

		// u6 is answered rank 6, Redis loses it, and after the rebuild
		// another user is answered rank 6 again.
		res, err := f.gate.Claim(ctx, "rq", "u6", "")
		if err != nil || res.Rank != 6 {
			t.Fatalf("u6: %+v, %v", res, err)
		}
		u6 := claim.Unconfirmed{Rank: 6, UserID: "u6", Slot: 1, AcceptedAt: res.AcceptedAt}
		f.loseFrom(t, "rq", 6)
		rs = f.gate.Requeue(ctx, "rq", []claim.Unconfirmed{u6})
		sameOutcomes(t, "u6 before a rebuild", rs, claim.RequeueLost)
		f.after(t, rs[0].RebuiltAfter) // only a rebuild resumed later counts
		f.rebuilt(t, p)
		if res, err := f.gate.Claim(ctx, "rq", "n2", ""); err != nil || res.Rank != 6 {
			t.Fatalf("n2 after the loss: %+v, %v; want rank 6, the one no fence saw", res, err)
		}
		u6.RebuiltAfter = rs[0].RebuiltAfter
		before = f.streamLen(t, "rq")
		sameOutcomes(t, "u6 after the rebuild", f.gate.Requeue(ctx, "rq", []claim.Unconfirmed{u6}), claim.RequeueCollided)
		sameOutcomes(t, "u6 a second time", f.gate.Requeue(ctx, "rq", []claim.Unconfirmed{u6}), claim.RequeuePresent)
		if n := f.streamLen(t, "rq"); n != before+1 {
			t.Fatalf("stream holds %d entries, want %d", n, before+1)
		}
		if l, u := f.hget(t, k.ByUser(), "u6"), f.count(t, "rq", "u6"); l != "6" || u != "1" {
			t.Fatalf("u6 after the collision: ranks %q, count %q; want 6 and 1", l, u)
		}
		if _, err := f.gate.Claim(ctx, "rq", "u6", ""); !errors.Is(err, claim.ErrAlreadyClaimed) {
			t.Fatalf("new claim of u6: %v, want ErrAlreadyClaimed", err)
		}
		// Once the issuer re-ranked u6's claim, it is left where it is.
		rank, fresh, err := f.gate.Rerank(ctx, "rq", 6, "u6", 1, u6.AcceptedAt, 0)
		if err != nil || !fresh {
			t.Fatalf("re-rank of u6: %d, %v, %v", rank, fresh, err)
		}
		rs = f.gate.Requeue(ctx, "rq", []claim.Unconfirmed{u6})
		if sameOutcomes(t, "u6 re-ranked", rs, claim.RequeueReranked); rs[0].Rank != rank {
			t.Fatalf("u6 re-ranked to %d, requeue says %d", rank, rs[0].Rank)
		}
		sameOutcomes(t, "unknown promotion", f.gate.Requeue(ctx, "none", []claim.Unconfirmed{u6}), claim.RequeueNotFound)
	})
}
