package claim_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

type fixture struct {
	gate   *claim.Gate
	client rueidis.Client
	prefix string
	layout claim.Layout
}

// topo is a Redis topology and the layout of the promotions a test opens
// on it.
type topo struct {
	redistest.Topology
	layout claim.Layout
}

func setup(t *testing.T, tp topo) fixture {
	t.Helper()
	c := tp.Client(t)
	p := redistest.Prefix(t)
	return fixture{gate: newLayoutGate(t, c, p, tp.layout), client: c, prefix: p, layout: tp.layout}
}

// newGate returns a gate on c under prefix.
func newGate(t testing.TB, c rueidis.Client, prefix string) *claim.Gate {
	return newLayoutGate(t, c, prefix, claim.LayoutDefault)
}

// newLayoutGate returns a gate on c under prefix that creates promotions
// of layout.
func newLayoutGate(t testing.TB, c rueidis.Client, prefix string, layout claim.Layout) *claim.Gate {
	t.Helper()
	g, err := claim.New(c, claim.Config{Prefix: prefix, Layout: layout})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (f fixture) open(t *testing.T, p claim.Promotion) {
	t.Helper()
	if p.StartsAt.IsZero() {
		p.StartsAt = time.Now().Add(-time.Minute)
	}
	if p.EndsAt.IsZero() {
		p.EndsAt = time.Now().Add(time.Hour)
	}
	if p.PerUserLimit == 0 {
		p.PerUserLimit = 1
	}
	if _, err := f.gate.Open(context.Background(), p); err != nil {
		t.Fatalf("open: %v", err)
	}
}

// eachTopology runs fn on every topology, for promotions of each layout.
func eachTopology(t *testing.T, fn func(t *testing.T, tp topo)) {
	for _, tp := range redistest.Topologies(t) {
		for _, l := range []claim.Layout{claim.LayoutCompact, claim.LayoutClassic} {
			t.Run(tp.Name+"/"+l.String(), func(t *testing.T) {
				t.Parallel()
				fn(t, topo{Topology: tp, layout: l})
			})
		}
	}
}

// TestSeedScenario is the seed scenario: 1,000 stock, 2,000 users in 10 waves
// of 200 concurrent claims: exactly 1,000 accepted with ranks 1..1,000 in
// arrival order and 1,000 sold out, and 1,000 entries in the work stream.
func TestSeedScenario(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, claim.Promotion{ID: "seed", Stock: 1000})
		var (
			mu       sync.Mutex
			ranks    = map[int64]string{}
			soldOut  int
			accepted int
		)
		for wave := 0; wave < 10; wave++ {
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := 0; i < 200; i++ {
				user := fmt.Sprintf("u%d-%d", wave, i)
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					res, err := f.gate.Claim(ctx, "seed", user, "")
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						accepted++
						if prev, dup := ranks[res.Rank]; dup {
							t.Errorf("rank %d given to %s and %s", res.Rank, prev, user)
						}
						ranks[res.Rank] = user
						if res.ClaimID != claim.ClaimID("seed", res.Rank) {
							t.Errorf("claim id %q for rank %d", res.ClaimID, res.Rank)
						}
					case errors.Is(err, claim.ErrSoldOut):
						soldOut++
					default:
						t.Errorf("claim: %v", err)
					}
				}()
			}
			close(start)
			wg.Wait()
		}
		if accepted != 1000 || soldOut != 1000 {
			t.Fatalf("accepted %d, sold out %d; want 1000 and 1000", accepted, soldOut)
		}
		for r := int64(1); r <= 1000; r++ {
			if _, ok := ranks[r]; !ok {
				t.Fatalf("rank %d missing", r)
			}
		}
		n, err := f.client.Do(ctx, f.client.B().Xlen().Key(f.gate.Keys("seed").Stream()).Build()).AsInt64()
		if err != nil || n != 1000 {
			t.Fatalf("stream length %d (%v), want 1000", n, err)
		}
		st, err := f.gate.State(ctx, "seed")
		if err != nil || st.Accepted() != 1000 || st.Remaining() != 0 {
			t.Fatalf("state %+v (%v)", st, err)
		}
	})
}

// TestPerUserLimit fires 50 concurrent claims of one user.
func TestPerUserLimit(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{1, 3} {
		eachTopology(t, func(t *testing.T, tp topo) {
			f := setup(t, tp)
			ctx := context.Background()
			id := fmt.Sprintf("limit-%d", limit)
			f.open(t, claim.Promotion{ID: id, Stock: 100, PerUserLimit: limit})
			var wg sync.WaitGroup
			var mu sync.Mutex
			slots := map[int]bool{}
			already := 0
			for i := 0; i < 50; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := f.gate.Claim(ctx, id, "same-user", "")
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						if slots[res.Slot] {
							t.Errorf("slot %d twice", res.Slot)
						}
						slots[res.Slot] = true
					case errors.Is(err, claim.ErrAlreadyClaimed):
						already++
					default:
						t.Errorf("claim: %v", err)
					}
				}()
			}
			wg.Wait()
			if len(slots) != limit || already != 50-limit {
				t.Fatalf("limit %d: accepted %d, already_claimed %d", limit, len(slots), already)
			}
			cs, err := f.gate.UserClaims(ctx, id, "same-user")
			if err != nil || len(cs) != limit {
				t.Fatalf("user claims %v (%v)", cs, err)
			}
		})
	}
}

func TestWindow(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		now := time.Now()
		f.open(t, claim.Promotion{ID: "later", Stock: 5, StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour)})
		f.open(t, claim.Promotion{ID: "past", Stock: 5, StartsAt: now.Add(-2 * time.Hour), EndsAt: now.Add(-time.Hour)})
		f.open(t, claim.Promotion{ID: "open", Stock: 5})
		cases := []struct {
			id   string
			want error
		}{
			{"later", claim.ErrNotStarted},
			{"past", claim.ErrEnded},
			{"missing", claim.ErrNotFound},
		}
		for _, c := range cases {
			if _, err := f.gate.Claim(ctx, c.id, "u1", ""); !errors.Is(err, c.want) {
				t.Errorf("%s: got %v, want %v", c.id, err, c.want)
			}
		}
		if _, err := f.gate.Claim(ctx, "open", "u1", ""); err != nil {
			t.Fatalf("open claim: %v", err)
		}
		if err := f.gate.Close(ctx, "open"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.gate.Claim(ctx, "open", "u2", ""); !errors.Is(err, claim.ErrEnded) {
			t.Fatalf("after close: %v", err)
		}
		st, _ := f.gate.State(ctx, "open")
		if st.Accepted() != 1 || !st.Closed {
			t.Fatalf("state after close %+v", st)
		}
		if err := f.gate.Close(ctx, "missing"); !errors.Is(err, claim.ErrNotFound) {
			t.Fatalf("close missing: %v", err)
		}
	})
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, claim.Promotion{ID: "idem", Stock: 1})
		first, err := f.gate.Claim(ctx, "idem", "alice", "key-1")
		if err != nil || first.Replayed {
			t.Fatalf("first: %+v %v", first, err)
		}
		// Concurrent retries with the same key all get the original answer.
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				again, err := f.gate.Claim(ctx, "idem", "alice", "key-1")
				if err != nil || !again.Replayed || again.Rank != first.Rank || again.ClaimID != first.ClaimID || again.Slot != first.Slot {
					t.Errorf("retry: %+v %v", again, err)
				}
			}()
		}
		wg.Wait()
		if _, err := f.gate.Claim(ctx, "idem", "alice", "key-2"); !errors.Is(err, claim.ErrAlreadyClaimed) {
			t.Fatalf("other key: %v", err)
		}
		// The key is per user: bob with alice's key is a new claim (and sold out).
		if _, err := f.gate.Claim(ctx, "idem", "bob", "key-1"); !errors.Is(err, claim.ErrSoldOut) {
			t.Fatalf("bob: %v", err)
		}
		if st, _ := f.gate.State(ctx, "idem"); st.Accepted() != 1 {
			t.Fatalf("accepted %d", st.Accepted())
		}
		// Once the claim is voided, a retry gets ErrVoided, not the 202
		// of a claim that holds no unit any more.
		if err := f.gate.MarkFailed(ctx, "idem", first.Rank); err != nil {
			t.Fatal(err)
		}
		if n, _, err := f.gate.Void(ctx, "idem", first.Rank); err != nil || n != 1 {
			t.Fatalf("void: %d %v", n, err)
		}
		if _, err := f.gate.Claim(ctx, "idem", "alice", "key-1"); !errors.Is(err, claim.ErrVoided) {
			t.Fatalf("retry of a voided claim: %v, want ErrVoided", err)
		}
	})
}

// TestFence: a claim or grant whose fence is above the rank counter takes
// nothing, marks the promotion rebuilding and answers ErrLost; at or below
// it, the claim goes through.
func TestFence(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, claim.Promotion{ID: "fence", Stock: 10})
		f.open(t, claim.Promotion{ID: "gfence", Stock: 10, Grant: true})
		if r, err := f.gate.ClaimFenced(ctx, "fence", "u1", "", 0); err != nil || r.Rank != 1 {
			t.Fatalf("first claim: %+v %v", r, err)
		}
		if r, err := f.gate.ClaimFenced(ctx, "fence", "u2", "", 1); err != nil || r.Rank != 2 {
			t.Fatalf("claim at the fence: %+v %v", r, err)
		}
		if _, err := f.gate.ClaimFenced(ctx, "fence", "u3", "", 5); !errors.Is(err, claim.ErrLost) {
			t.Fatalf("claim below the fence: %v, want ErrLost", err)
		}
		if _, err := f.gate.Claim(ctx, "fence", "u3", ""); !errors.Is(err, claim.ErrRebuilding) {
			t.Fatalf("claim after the fence marked it rebuilding: %v, want ErrRebuilding", err)
		}
		if st, _ := f.gate.State(ctx, "fence"); st.Seq != 2 {
			t.Fatalf("seq %d after a fenced claim, want 2", st.Seq)
		}
		if _, err := f.gate.GrantFenced(ctx, "gfence", []string{"a", "b"}, 3); !errors.Is(err, claim.ErrLost) {
			t.Fatalf("grant below the fence: %v, want ErrLost", err)
		}
	})
}

func TestOpenIsIdempotentAndGroupStartsAtZero(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		p := claim.Promotion{ID: "reopen", Stock: 10, PerUserLimit: 1, StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)}
		created, err := f.gate.Open(ctx, p)
		if err != nil || !created {
			t.Fatalf("first open: %v %v", created, err)
		}
		for i := 0; i < 3; i++ {
			if _, err := f.gate.Claim(ctx, "reopen", fmt.Sprintf("u%d", i), ""); err != nil {
				t.Fatal(err)
			}
		}
		created, err = f.gate.Open(ctx, p)
		if err != nil || created {
			t.Fatalf("second open: %v %v", created, err)
		}
		st, _ := f.gate.State(ctx, "reopen")
		if st.Seq != 3 {
			t.Fatalf("reopen reset seq to %d", st.Seq)
		}
		// The group was created at 0, before the claims: all three are undelivered.
		groups, err := f.client.Do(ctx, f.client.B().XinfoGroups().Key(f.gate.Keys("reopen").Stream()).Build()).ToArray()
		if err != nil || len(groups) != 1 {
			t.Fatalf("groups %v %v", groups, err)
		}
		g, _ := groups[0].AsMap()
		lagMsg := g["lag"]
		if lag, err := lagMsg.AsInt64(); err != nil || lag != 3 {
			t.Fatalf("lag %v (%v), want 3", lag, err)
		}
	})
}

func TestSeqFloorRebuild(t *testing.T) {
	t.Parallel()
	tp := topo{Topology: redistest.Topologies(t)[0]}
	f := setup(t, tp)
	ctx := context.Background()
	// Redis lost the promotion; the database knows ranks up to 7.
	f.open(t, claim.Promotion{ID: "lost", Stock: 10, SeqFloor: 7})
	res, err := f.gate.Claim(ctx, "lost", "u1", "")
	if err != nil || res.Rank != 8 || res.Remaining != 2 {
		t.Fatalf("claim after rebuild: %+v %v", res, err)
	}
}

func TestAckMarksIssued(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, claim.Promotion{ID: "ack", Stock: 3})
		if _, err := f.gate.Claim(ctx, "ack", "u1", ""); err != nil {
			t.Fatal(err)
		}
		k := f.gate.Keys("ack")
		entries, err := f.client.Do(ctx, f.client.B().Xreadgroup().Group(claim.Group, "c1").Count(10).Streams().Key(k.Stream()).Id(">").Build()).AsXRead()
		if err != nil || len(entries[k.Stream()]) != 1 {
			t.Fatalf("read: %v %v", entries, err)
		}
		e := entries[k.Stream()][0]
		if e.FieldValues["claim_id"] != "ack#1" || e.FieldValues["user"] != "u1" || e.FieldValues["slot"] != "1" {
			t.Fatalf("entry fields %v", e.FieldValues)
		}
		cs, _ := f.gate.UserClaims(ctx, "ack", "u1")
		if len(cs) != 1 || cs[0].Status != claim.StatusPending {
			t.Fatalf("before ack %+v", cs)
		}
		n, err := f.gate.Ack(ctx, "ack", []claim.Entry{{ID: e.ID, Rank: "1"}})
		if err != nil || n != 1 {
			t.Fatalf("ack %d %v", n, err)
		}
		cs, _ = f.gate.UserClaims(ctx, "ack", "u1")
		// A compact promotion leaves the time of issue to the database.
		if len(cs) != 1 || cs[0].Status != claim.StatusIssued || cs[0].IssuedAt.IsZero() != (f.layout != claim.LayoutClassic) {
			t.Fatalf("after ack %+v", cs)
		}
		// Acking again is harmless.
		if n, err := f.gate.Ack(ctx, "ack", []claim.Entry{{ID: e.ID, Rank: "1"}}); err != nil || n != 0 {
			t.Fatalf("second ack %d %v", n, err)
		}
	})
}

func TestFailReplayVoid(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, claim.Promotion{ID: "dl", Stock: 2})
		for _, u := range []string{"u1", "u2"} {
			if _, err := f.gate.Claim(ctx, "dl", u, ""); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.gate.Claim(ctx, "dl", "u3", ""); !errors.Is(err, claim.ErrSoldOut) {
			t.Fatalf("want sold out: %v", err)
		}
		if err := f.gate.MarkFailed(ctx, "dl", 1, 2); err != nil {
			t.Fatal(err)
		}
		ok, err := f.gate.Replay(ctx, "dl", 1, map[string]string{"claim_id": "dl#1", "user": "u1", "rank": "1", "slot": "1", "at": "1"})
		if err != nil || !ok {
			t.Fatalf("replay %v %v", ok, err)
		}
		// Applying the same replay again enqueues nothing more.
		if ok, err := f.gate.Replay(ctx, "dl", 1, map[string]string{"claim_id": "dl#1", "user": "u1", "rank": "1", "slot": "1", "at": "1"}); err != nil || ok {
			t.Fatalf("second replay %v %v", ok, err)
		}
		if n, _, err := f.gate.Void(ctx, "dl", 2); err != nil || n != 1 {
			t.Fatalf("void %d %v", n, err)
		}
		// Voiding twice returns nothing more.
		if n, _, _ := f.gate.Void(ctx, "dl", 2); n != 0 {
			t.Fatalf("second void %d", n)
		}
		res, err := f.gate.Claim(ctx, "dl", "u3", "")
		if err != nil || res.Rank != 3 {
			t.Fatalf("claim after void: %+v %v", res, err)
		}
		if _, err := f.gate.Claim(ctx, "dl", "u4", ""); !errors.Is(err, claim.ErrSoldOut) {
			t.Fatalf("want sold out again: %v", err)
		}
		n, _ := f.client.Do(ctx, f.client.B().Xlen().Key(f.gate.Keys("dl").Stream()).Build()).AsInt64()
		if n != 4 { // two claims, one replay, one claim after void
			t.Fatalf("stream length %d", n)
		}
	})
}

func TestGrant(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, claim.Promotion{ID: "g", Grant: true, PerUserLimit: 1})
		res, err := f.gate.Grant(ctx, "g", []string{"a", "b", "a", "c"})
		if err != nil || res.Enqueued != 3 || res.Duplicates != 1 {
			t.Fatalf("grant %+v %v", res, err)
		}
		res, err = f.gate.Grant(ctx, "g", []string{"c", "d"})
		if err != nil || res.Enqueued != 1 || res.Duplicates != 1 {
			t.Fatalf("regrant %+v %v", res, err)
		}
		if _, err := f.gate.Claim(ctx, "g", "x", ""); !errors.Is(err, claim.ErrWrongMode) {
			t.Fatalf("claim on grant: %v", err)
		}
		f.open(t, claim.Promotion{ID: "fc", Stock: 1})
		if _, err := f.gate.Grant(ctx, "fc", []string{"a"}); !errors.Is(err, claim.ErrWrongMode) {
			t.Fatalf("grant on first-come: %v", err)
		}
	})
}

// TestAckBatchKeepsVoided: one ack of a batch marks every claim issued but a
// voided one.
func TestAckBatchKeepsVoided(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, claim.Promotion{ID: "batch", Stock: 3})
		for _, u := range []string{"u1", "u2", "u3"} {
			if _, err := f.gate.Claim(ctx, "batch", u, ""); err != nil {
				t.Fatal(err)
			}
		}
		k := f.gate.Keys("batch")
		read, err := f.client.Do(ctx, f.client.B().Xreadgroup().Group(claim.Group, "c1").Count(10).Streams().Key(k.Stream()).Id(">").Build()).AsXRead()
		if err != nil || len(read[k.Stream()]) != 3 {
			t.Fatalf("read: %v %v", read, err)
		}
		if n, _, err := f.gate.Void(ctx, "batch", 2); err != nil || n != 1 {
			t.Fatalf("void: %d %v", n, err)
		}
		var entries []claim.Entry
		for _, e := range read[k.Stream()] {
			entries = append(entries, claim.Entry{ID: e.ID, Rank: e.FieldValues["rank"]})
		}
		if n, err := f.gate.Ack(ctx, "batch", entries); err != nil || n != 3 {
			t.Fatalf("ack: %d %v", n, err)
		}
		want := map[string]string{"u1": claim.StatusIssued, "u2": claim.StatusVoided, "u3": claim.StatusIssued}
		for u, st := range want {
			cs, err := f.gate.UserClaims(ctx, "batch", u)
			if err != nil || len(cs) != 1 || cs[0].Status != st {
				t.Fatalf("%s: %+v %v, want %s", u, cs, err, st)
			}
		}
	})
}

// TestIdempotentRetryKeepsItsSlot: a retry answers with the original
// claim's slot, not the user's latest one.
func TestIdempotentRetryKeepsItsSlot(t *testing.T) {
	t.Parallel()
	f := setup(t, topo{Topology: redistest.Topologies(t)[0]})
	ctx := context.Background()
	f.open(t, claim.Promotion{ID: "slots", Stock: 10, PerUserLimit: 3})
	first, err := f.gate.Claim(ctx, "slots", "u1", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.gate.Claim(ctx, "slots", "u1", "k2"); err != nil {
		t.Fatal(err)
	}
	again, err := f.gate.Claim(ctx, "slots", "u1", "k1")
	if err != nil || !again.Replayed || again.Slot != first.Slot || again.Rank != first.Rank {
		t.Fatalf("retry %+v %v, first answer %+v", again, err, first)
	}
}
