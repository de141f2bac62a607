package claim_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// forget deletes every key of promotion id, as a flush of Redis would.
func (f fixture) forget(t *testing.T, id string) {
	t.Helper()
	k := f.gate.Keys(id)
	for _, key := range []string{k.Meta(), k.Seq(), k.Users(), k.Status(), k.StatusBytes(), k.ByUser(), k.Idem(), k.Stream()} {
		if err := f.client.Do(context.Background(), f.client.B().Del().Key(key).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
}

func (f fixture) hget(t *testing.T, key, field string) string {
	t.Helper()
	v, err := f.client.Do(context.Background(), f.client.B().Hget().Key(key).Field(field).Build()).ToString()
	if err != nil {
		return ""
	}
	return v
}

// status returns the status Redis holds for rank of promotion id, in
// the fixture's layout ("" for none).
func (f fixture) status(t *testing.T, id, rank string) string {
	t.Helper()
	k := f.gate.Keys(id)
	if f.layout == claim.LayoutClassic {
		return f.hget(t, k.Status(), rank)
	}
	r, _ := strconv.ParseInt(rank, 10, 64)
	b, err := f.client.Do(context.Background(), f.client.B().Getrange().Key(k.StatusBytes()).Start(r).End(r).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	if b == "\x00" {
		return ""
	}
	return b
}

// issued is the status of a claim issued at ms, in the fixture's layout.
func (f fixture) issued(ms int64) string {
	if f.layout == claim.LayoutClassic {
		return "i:" + strconv.FormatInt(ms, 10)
	}
	return "i"
}

// count returns the count of user's claims in promotion id: the users
// hash's in the classic layout, the number of ranks in the user's list in
// the compact one ("" for none).
func (f fixture) count(t *testing.T, id, user string) string {
	t.Helper()
	k := f.gate.Keys(id)
	if f.layout == claim.LayoutClassic {
		return f.hget(t, k.Users(), user)
	}
	list := f.hget(t, k.ByUser(), user)
	if list == "" {
		return ""
	}
	return strconv.Itoa(strings.Count(list, ",") + 1)
}

func (f fixture) streamLen(t *testing.T, id string) int64 {
	t.Helper()
	n, err := f.client.Do(context.Background(), f.client.B().Xlen().Key(f.gate.Keys(id).Stream()).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func promo(id string, stock int64, limit int) claim.Promotion {
	return claim.Promotion{ID: id, Stock: stock, PerUserLimit: limit,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)}
}

// TestBeginRebuildAnswersRebuilding: while rebuilding, claims (retries
// included) and grants answer ErrRebuilding and take nothing; Resume lets
// them through again with ranks above the floor.
func TestBeginRebuildAnswersRebuilding(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, promo("p", 100, 1))
		if _, err := f.gate.Claim(ctx, "p", "u1", "key-1"); err != nil {
			t.Fatal(err)
		}
		r, err := f.gate.BeginRebuild(ctx, promo("p", 100, 1), "test", 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.Created() {
			t.Error("BeginRebuild of a live promotion reported it created")
		}
		for _, c := range []struct{ user, key string }{{"u2", ""}, {"u1", "key-1"}} {
			if _, err := f.gate.Claim(ctx, "p", c.user, c.key); !errors.Is(err, claim.ErrRebuilding) {
				t.Fatalf("claim of %s while rebuilding: %v, want ErrRebuilding", c.user, err)
			}
		}
		g := promo("g", 0, 1)
		g.Grant = true
		f.open(t, g)
		if _, err := f.gate.BeginRebuild(ctx, g, "test", 0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.gate.Grant(ctx, "g", []string{"a", "b"}); !errors.Is(err, claim.ErrRebuilding) {
			t.Fatalf("grant while rebuilding: %v, want ErrRebuilding", err)
		}
		if st, _ := f.gate.State(ctx, "p"); st.Seq != 1 {
			t.Fatalf("seq %d after refused claims, want 1", st.Seq)
		}

		seq, err := r.Resume(ctx, 40)
		if err != nil || seq != 40 {
			t.Fatalf("Resume(40) = %d, %v; want 40", seq, err)
		}
		res, err := f.gate.Claim(ctx, "p", "u2", "")
		if err != nil || res.Rank != 41 {
			t.Fatalf("claim after resume = %+v, %v; want rank 41", res, err)
		}
	})
}

// TestOpenRebuilding creates a missing meta hash rebuilding and leaves a
// live one as it is.
func TestOpenRebuilding(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, promo("live", 10, 1))
		created, err := f.gate.OpenRebuilding(ctx, promo("live", 10, 1))
		if err != nil || created {
			t.Fatalf("OpenRebuilding(live) = %v, %v; want not created", created, err)
		}
		if _, err := f.gate.Claim(ctx, "live", "u", ""); err != nil {
			t.Fatalf("claim on a live promotion after OpenRebuilding: %v", err)
		}
		p := promo("lost", 10, 1)
		p.SeqFloor = 7
		created, err = f.gate.OpenRebuilding(ctx, p)
		if err != nil || !created {
			t.Fatalf("OpenRebuilding(lost) = %v, %v; want created", created, err)
		}
		if _, err := f.gate.Claim(ctx, "lost", "u", ""); !errors.Is(err, claim.ErrRebuilding) {
			t.Fatalf("claim on a promotion created rebuilding: %v, want ErrRebuilding", err)
		}
		marks, err := f.gate.Marks(ctx, []string{"live", "lost", "never"})
		if err != nil {
			t.Fatal(err)
		}
		want := []claim.Mark{{Exists: true, Seq: 1}, {Exists: true, Rebuilding: true, Seq: 7}, {}}
		for i := range want {
			// Only the durability markers are compared here.
			marks[i].Stock, marks[i].EndsAt = 0, time.Time{}
			if marks[i] != want[i] {
				t.Errorf("mark %d = %+v, want %+v", i, marks[i], want[i])
			}
		}
	})
}

// TestRestoreMerges restores a promotion whose keys were lost: users,
// byuser, status and voided come back from the known claims; a second
// restore changes nothing; values Redis holds above the database's are kept.
func TestRestoreMerges(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		p := promo("r", 10, 3)
		f.open(t, p)
		// Redis already knows one claim the database does not: user z holds
		// rank 9 (pending) and must keep it.
		for range 9 {
			if _, err := f.gate.Claim(ctx, "r", "z", ""); err != nil && !errors.Is(err, claim.ErrAlreadyClaimed) {
				t.Fatal(err)
			}
		}
		f.forget(t, "r")
		f.open(t, promo("r", 10, 3))
		if _, err := f.gate.Claim(ctx, "r", "z", ""); err != nil {
			t.Fatal(err) // rank 1 for z in the fresh state
		}
		r, err := f.gate.BeginRebuild(ctx, p, "test", 0)
		if err != nil {
			t.Fatal(err)
		}
		issued := time.UnixMilli(1764000000123)
		known := []claim.Known{
			{Rank: 1, UserID: "z", Slot: 1, Status: claim.StatusIssued, IssuedAt: issued},
			{Rank: 2, UserID: "a", Slot: 1, Status: claim.StatusIssued, IssuedAt: issued},
			{Rank: 3, UserID: "b", Slot: 1, Status: claim.StatusFailed},
			{Rank: 4, UserID: "a", Slot: 2, Status: claim.StatusVoided},
			{Rank: 5, UserID: "c", Slot: 1, Status: claim.StatusPending, ClaimID: "r#5", AcceptedAt: issued},
			{Rank: 6, UserID: "a", Slot: 3, Status: claim.StatusIssued, IssuedAt: issued},
		}
		st, err := r.Restore(ctx, known)
		if err != nil {
			t.Fatal(err)
		}
		// z already held 1: not raised; a raised three times, b and c once.
		if want := (claim.RestoreStats{Users: 5, Statuses: 6, Voided: 1, Requeued: 1}); st != want {
			t.Fatalf("restore stats %+v, want %+v", st, want)
		}
		k := f.gate.Keys("r")
		count := func(u string) string { return f.count(t, "r", u) }
		status := func(r string) string { return f.status(t, "r", r) }
		hash := func(key string) func(string) string {
			return func(field string) string { return f.hget(t, key, field) }
		}
		for _, c := range []struct {
			what, field, want string
			get               func(string) string
		}{
			{"count", "a", "3", count}, {"count", "b", "1", count}, {"count", "c", "1", count}, {"count", "z", "1", count},
			{"byuser", "a", "2,4,6", hash(k.ByUser())}, {"byuser", "z", "1", hash(k.ByUser())},
			{"status", "1", f.issued(1764000000123), status}, {"status", "3", "f", status}, {"status", "4", "v", status},
			{"status", "5", "p", status}, {"meta", "voided", "1", hash(k.Meta())},
		} {
			if got := c.get(c.field); got != c.want {
				t.Errorf("%s[%s] = %q, want %q", c.what, c.field, got, c.want)
			}
		}
		if n := f.streamLen(t, "r"); n != 2 { // z's fresh claim and the requeued r#5
			t.Fatalf("stream holds %d entries, want 2", n)
		}

		again, err := r.Restore(ctx, known)
		if err != nil || again != (claim.RestoreStats{}) {
			t.Fatalf("second restore = %+v, %v; want no change", again, err)
		}
		if n := f.streamLen(t, "r"); n != 2 {
			t.Fatalf("second restore enqueued again: %d entries", n)
		}
		seq, err := r.Resume(ctx, 6)
		if err != nil || seq != 6 {
			t.Fatalf("Resume(6) = %d, %v", seq, err)
		}
		// Stock 10, 6 ranks handed out, 1 voided: 5 left. User a is at its limit.
		if _, err := f.gate.Claim(ctx, "r", "a", ""); !errors.Is(err, claim.ErrAlreadyClaimed) {
			t.Fatalf("user a after restore: %v, want ErrAlreadyClaimed", err)
		}
		res, err := f.gate.Claim(ctx, "r", "d", "")
		if err != nil || res.Rank != 7 || res.Remaining != 4 {
			t.Fatalf("claim after restore = %+v, %v; want rank 7, 4 remaining", res, err)
		}
		cs, err := f.gate.UserClaims(ctx, "r", "a")
		if err != nil || len(cs) != 3 || cs[0].Status != claim.StatusIssued || cs[1].Status != claim.StatusVoided {
			t.Fatalf("claims of a = %+v, %v", cs, err)
		}
	})
}

// TestRestoreNeverLowers: statuses only move forward and counts only up.
func TestRestoreNeverLowers(t *testing.T) {
	t.Parallel()
	for _, l := range []claim.Layout{claim.LayoutCompact, claim.LayoutClassic} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			restoreNeverLowers(t, setup(t, topo{Topology: redistest.Topologies(t)[0], layout: l}))
		})
	}
}

func restoreNeverLowers(t *testing.T, f fixture) {
	ctx := context.Background()
	p := promo("n", 10, 5)
	f.open(t, p)
	for range 4 {
		if _, err := f.gate.Claim(ctx, "n", "u", ""); err != nil {
			t.Fatal(err)
		}
	}
	// Ranks 1..4: 1 issued, 2 failed, 3 voided, 4 pending.
	if _, err := f.gate.Ack(ctx, "n", []claim.Entry{{ID: "0-1", Rank: "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := f.gate.MarkFailed(ctx, "n", 2, 3); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.gate.Void(ctx, "n", 3); err != nil {
		t.Fatal(err)
	}
	k := f.gate.Keys("n")
	issuedAt := f.status(t, "n", "1")
	r, err := f.gate.BeginRebuild(ctx, p, "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Restore(ctx, []claim.Known{
		{Rank: 1, UserID: "u", Slot: 1, Status: claim.StatusFailed},
		{Rank: 2, UserID: "u", Slot: 2, Status: claim.StatusPending, ClaimID: "n#2"},
		{Rank: 3, UserID: "u", Slot: 3, Status: claim.StatusIssued, IssuedAt: time.Now()},
		{Rank: 4, UserID: "u", Slot: 1, Status: claim.StatusVoided},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Only rank 4 moves (pending → voided); nothing else goes back.
	if want := (claim.RestoreStats{Statuses: 1, Voided: 1}); st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	for rank, want := range map[string]string{"1": issuedAt, "2": "f", "3": "v", "4": "v"} {
		if got := f.status(t, "n", rank); got != want {
			t.Errorf("status of rank %s = %q, want %q", rank, got, want)
		}
	}
	if got := f.count(t, "n", "u"); got != "4" {
		t.Errorf("user count %s, want 4 (never lowered)", got)
	}
	if got := f.hget(t, k.Meta(), "voided"); got != "2" {
		t.Errorf("voided %s, want 2", got)
	}
	if seq, err := r.Resume(ctx, 2); err != nil || seq != 4 {
		t.Fatalf("Resume(2) = %d, %v; want the counter kept at 4", seq, err)
	}
}

// TestRestoreChunks restores more claims than one script call carries.
func TestRestoreChunks(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		const n = 2*claim.RestoreChunk + 500
		p := promo("big", n+10, 1)
		r, err := f.gate.BeginRebuild(ctx, p, "test", 0)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Created() {
			t.Error("BeginRebuild of an unknown promotion did not report it created")
		}
		known := make([]claim.Known, n)
		for i := range known {
			known[i] = claim.Known{Rank: int64(i + 1), UserID: fmt.Sprintf("u%d", i+1), Slot: 1,
				Status: claim.StatusIssued, IssuedAt: time.Now()}
		}
		st, err := r.Restore(ctx, known)
		if err != nil || st.Users != n || st.Statuses != n {
			t.Fatalf("restore = %+v, %v; want %d users and statuses", st, err, n)
		}
		if _, err := r.Resume(ctx, n); err != nil {
			t.Fatal(err)
		}
		for _, u := range []int{1, claim.RestoreChunk, claim.RestoreChunk + 1, n} {
			if _, err := f.gate.Claim(ctx, "big", "u"+strconv.Itoa(u), ""); !errors.Is(err, claim.ErrAlreadyClaimed) {
				t.Errorf("user u%d after restore: %v, want ErrAlreadyClaimed", u, err)
			}
		}
		res, err := f.gate.Claim(ctx, "big", "new", "")
		if err != nil || res.Rank != n+1 {
			t.Fatalf("new claim = %+v, %v; want rank %d", res, err, n+1)
		}
	})
}

// TestRebuildHold: one rebuild holds a promotion at a time; a released (or
// expired) hold is taken over and the old holder can neither restore nor
// resume; a promotion lost mid-rebuild supersedes it.
func TestRebuildHold(t *testing.T) {
	t.Parallel()
	f := setup(t, topo{Topology: redistest.Topologies(t)[0]})
	ctx := context.Background()
	p := promo("h", 10, 1)
	f.open(t, p)
	a, err := f.gate.BeginRebuild(ctx, p, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.gate.BeginRebuild(ctx, p, "b", time.Minute); !errors.Is(err, claim.ErrRebuildBusy) {
		t.Fatalf("second BeginRebuild: %v, want ErrRebuildBusy", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := f.gate.BeginRebuild(ctx, p, "b", time.Minute)
	if err != nil {
		t.Fatalf("BeginRebuild after release: %v", err)
	}
	one := []claim.Known{{Rank: 1, UserID: "u", Slot: 1, Status: claim.StatusFailed}}
	if _, err := a.Restore(ctx, one); !errors.Is(err, claim.ErrSuperseded) {
		t.Fatalf("restore by the old holder: %v, want ErrSuperseded", err)
	}
	if _, err := a.Resume(ctx, 0); !errors.Is(err, claim.ErrSuperseded) {
		t.Fatalf("resume by the old holder: %v, want ErrSuperseded", err)
	}
	if _, err := f.gate.Claim(ctx, "h", "u", ""); !errors.Is(err, claim.ErrRebuilding) {
		t.Fatalf("claim after a superseded resume: %v, want still rebuilding", err)
	}

	// An expired hold is taken over without a release.
	c, err := f.gate.BeginRebuild(ctx, promo("e", 10, 1), "c", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var d *claim.Rebuild
	deadline := time.Now().Add(10 * time.Second)
	for d == nil {
		d, err = f.gate.BeginRebuild(ctx, promo("e", 10, 1), "d", time.Minute)
		if err != nil && (!errors.Is(err, claim.ErrRebuildBusy) || time.Now().After(deadline)) {
			t.Fatalf("take over an expired hold: %v", err)
		}
	}
	if _, err := c.Resume(ctx, 0); !errors.Is(err, claim.ErrSuperseded) {
		t.Fatalf("resume by the expired holder: %v, want ErrSuperseded", err)
	}

	// Redis loses the promotion mid-rebuild: the rebuild is superseded.
	f.forget(t, "h")
	if _, err := b.Restore(ctx, one); !errors.Is(err, claim.ErrSuperseded) {
		t.Fatalf("restore after the promotion was lost: %v, want ErrSuperseded", err)
	}
	if _, err := b.Resume(ctx, 1); !errors.Is(err, claim.ErrSuperseded) {
		t.Fatalf("resume after the promotion was lost: %v, want ErrSuperseded", err)
	}
	if err := d.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreNoticesLostChunks: if Redis loses writes again after the rebuild began
// (back to a point before chunks it had merged), the next Restore and the
// Resume find the count of applied chunks off and answer ErrSuperseded, so
// the rebuild starts over instead of resuming on half-merged state.
func TestRestoreNoticesLostChunks(t *testing.T) {
	t.Parallel()
	f := setup(t, topo{Topology: redistest.Topologies(t)[0]})
	ctx := context.Background()
	p := promo("relapse", 100, 1)
	r, err := f.gate.BeginRebuild(ctx, p, "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	first := []claim.Known{{Rank: 1, UserID: "u1", Slot: 1, Status: claim.StatusIssued, IssuedAt: time.Now()}}
	if _, err := r.Restore(ctx, first); err != nil {
		t.Fatal(err)
	}
	// Redis goes back to just after the rebuild began: the merged chunk is gone.
	k := f.gate.Keys("relapse")
	for _, cmd := range [][]string{{"HDEL", k.Users(), "u1"}, {"HDEL", k.ByUser(), "u1"}, {"HDEL", k.Status(), "1"}, {"HSET", k.Meta(), "rebuild_done", "0"}} {
		if err := f.client.Do(ctx, f.client.B().Arbitrary(cmd...).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	second := []claim.Known{{Rank: 2, UserID: "u2", Slot: 1, Status: claim.StatusIssued, IssuedAt: time.Now()}}
	if _, err := r.Restore(ctx, second); !errors.Is(err, claim.ErrSuperseded) {
		t.Fatalf("restore after a loss: %v, want ErrSuperseded", err)
	}
	if _, err := r.Resume(ctx, 2); !errors.Is(err, claim.ErrSuperseded) {
		t.Fatalf("resume after a loss: %v, want ErrSuperseded", err)
	}
	if _, err := f.gate.Claim(ctx, "relapse", "u1", ""); !errors.Is(err, claim.ErrRebuilding) {
		t.Fatalf("claim while the rebuild must start over: %v, want ErrRebuilding", err)
	}
}
