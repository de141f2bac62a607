package waitroom

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// apply changes the room's levers.
func (f fixture) apply(t *testing.T, l Levers) {
	t.Helper()
	if err := f.rooms.Apply(context.Background(), f.id, l); err != nil {
		t.Fatal(err)
	}
}

// metaField reads a field of the room's meta ("" when absent).
func (f fixture) metaField(t *testing.T, field string) string {
	t.Helper()
	v, err := f.c.Do(context.Background(), f.c.B().Hget().Key(f.rooms.Keys(f.id).Meta()).Field(field).Build()).ToString()
	if err != nil && !strings.Contains(err.Error(), "nil") {
		t.Fatal(err)
	}
	return v
}

func ptr[T any](v T) *T { return &v }

// TestRateChangeKeepsTheAllowance: a rate changed while the room runs
// counts from the change: the ticks after it let in what the old rate
// allowed until the change plus what the new one allows since, whether it
// is raised or lowered (without the re-base, a raise would count the new
// rate from the opening and let in the cap at once, and a cut would stall
// admission for as long).
func TestRateChangeKeepsTheAllowance(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := line(t, tp, 1000) // 300 waiting, 50/s
		first := f.tick(t)
		f.shift(t, 1000)
		f.tick(t)
		// 600 ms at 50/s (30 users), then 300 ms at 200/s (60 users).
		f.shift(t, 600)
		f.apply(t, Levers{AdmitPerSecond: ptr(int64(200))})
		f.shift(t, 300)
		res := f.tick(t)
		real := res.Now - first.Now // time that passed, at either rate
		got := res.Admitted - first.Admitted
		low, high := (50*1600+200*300+50*real)/1000-1, (50*1600+200*300+200*real)/1000
		if got < low || got > high {
			t.Fatalf("1.6 s at 50/s then 0.3 s at 200/s (and %d ms real) let in %d, want %d..%d", real, got, low, high)
		}
		// Back down to 50/s: 400 ms at 200/s (80 users), kept by the tick
		// right after the change (below the cap at 50/s, 100), then 1 s at
		// 50/s (50).
		from := res
		f.shift(t, 400)
		f.apply(t, Levers{AdmitPerSecond: ptr(int64(50))})
		f.tick(t)
		f.shift(t, 1000)
		res = f.tick(t)
		real, got = res.Now-from.Now, res.Admitted-from.Admitted
		low, high = (200*400+50*1000+50*real)/1000-1, (200*400+50*1000+200*real)/1000+1
		if got < low || got > high {
			t.Fatalf("0.4 s at 200/s then 1 s at 50/s (and %d ms real) let in %d, want %d..%d", real, got, low, high)
		}
		if r := f.metaField(t, f.rateField(t)); r != "50" {
			t.Fatalf("rate %q, want 50", r)
		}
	})
}

// TestRateChangeBeforeTheOpening: a rate changed before the room opens
// leaves the opening where it is: nothing accrued yet.
func TestRateChangeBeforeTheOpening(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 10)
		f.open(t, Settings{AdmitPerSecond: 10, OpensAt: later})
		before := f.metaField(t, "open_ms")
		f.apply(t, Levers{AdmitPerSecond: ptr(int64(1000))})
		if after := f.metaField(t, "open_ms"); after != before || f.metaField(t, f.rateField(t)) != "1000" {
			t.Fatalf("open_ms %s → %s, rate %s; want the opening kept and the rate 1000", before, after, f.metaField(t, f.rateField(t)))
		}
	})
}

// TestRateChangeWhilePaused: the pause does not count under either rate:
// the allowance at the change is the one the pause froze.
func TestRateChangeWhilePaused(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := line(t, tp, 1000)
		ctx := context.Background()
		first := f.tick(t)
		hold := func(on string) {
			t.Helper()
			if err := f.c.Do(ctx, f.c.B().Hset().Key(f.rooms.Keys(f.id).ClaimMeta()).FieldValue().
				FieldValue("held", on).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		f.shift(t, 1000) // a second at 50/s before the pause: 50
		hold("1")
		if res := f.tick(t); res.State != "paused" || res.Admitted != first.Admitted {
			t.Fatalf("paused tick: %+v", res)
		}
		// The pause lasts a minute (it and all before it happened a
		// minute earlier); the rate changes during it.
		f.shift(t, 60_000)
		if err := f.c.Do(ctx, f.c.B().Hincrby().Key(f.rooms.Keys(f.id).Meta()).Field("held_ms").
			Increment(-60_000).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		f.apply(t, Levers{AdmitPerSecond: ptr(int64(100))})
		hold("0")
		res := f.tick(t)
		real, got := res.Now-first.Now, res.Admitted-first.Admitted
		if low, high := int64(50)-1, 50+100*real/1000+1; got < low || got > high {
			t.Fatalf("a second at 50/s, a paused minute, then a resume at 100/s let in %d (%d ms real), want %d..%d", got, real, low, high)
		}
	})
}

// expireLive makes every live pass of the room expired, as if their time
// had passed.
func (f fixture) expireLive(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	k := f.rooms.Keys(f.id).Live()
	ids, err := f.c.Do(ctx, f.c.B().Zrange().Key(k).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := f.c.Do(ctx, f.c.B().Zadd().Key(k).ScoreMember().ScoreMember(1, id).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMaxActive: with a cap on live passes, admission lets in at most the
// cap less the live passes, whatever the rate, and resumes as passes are
// spent or expire; the cap changes live, and 0 lifts it.
func TestMaxActive(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 100)
		f.open(t, Settings{AdmitPerSecond: 1000, MaxActive: 5, OpensAt: later})
		f.join(t, 40)
		f.startAdmission(t)
		in, tokens := f.admittedNow(t)
		if len(in) != 5 {
			t.Fatalf("first tick let in %v, want 5 (the cap)", in)
		}
		if again, _ := f.admittedNow(t); len(again) != 0 {
			t.Fatalf("tick at the cap let in %v", again)
		}
		f.claimWith(t, in[0], tokens[in[0]])
		f.claimWith(t, in[1], tokens[in[1]])
		if more, _ := f.admittedNow(t); len(more) != 2 {
			t.Fatalf("two passes spent: let in %v, want 2", more)
		}
		f.expireLive(t)
		if more, _ := f.admittedNow(t); len(more) != 5 {
			t.Fatalf("the live passes expired: let in %v, want 5", more)
		}
		f.apply(t, Levers{MaxActive: ptr(int64(8))})
		if more, _ := f.admittedNow(t); len(more) != 3 {
			t.Fatalf("cap raised to 8: let in %v, want 3", more)
		}
		f.apply(t, Levers{MaxActive: ptr(int64(0))})
		res := f.tickBounded(t)
		if len(res.New) != 40-15 || f.metaField(t, "max_active") != "" {
			t.Fatalf("cap lifted: let in %d (max_active %q), want the other 25", len(res.New), f.metaField(t, "max_active"))
		}
	})
}

// TestTickV2BesideV3: during a rolling upgrade the previous release's tick
// (v2, testdata/room_tick_v2.lua) ignores the cap on live passes, as
// documented; neither hands a place or a pass out twice, and this one
// lets nobody in while the live passes v2 handed out are at or above the
// cap.
func TestTickV2BesideV3(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("testdata/room_tick_v2.lua")
	if err != nil {
		t.Fatal(err)
	}
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, classic(tp), 100)
		f.open(t, Settings{AdmitPerSecond: 10, MaxActive: 3, OpensAt: later})
		f.join(t, 30)
		f.startAdmission(t)
		batch := strconv.Itoa(DefaultTickBatch)
		v2 := func() TickResult {
			t.Helper()
			vals, err := f.c.Do(context.Background(), f.c.B().Eval().Script(string(src)).Numkeys(11).
				Key(previousRoom(f.rooms.Keys(f.id))...).Arg(batch, batch, "1000").Build()).ToArray()
			if err != nil {
				t.Fatal(err)
			}
			state, _ := vals[0].ToString()
			res, err := f.rooms.decodeTickHead(f.id, state, vals, previousTickHead)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		var passes []Admission
		passes = append(passes, f.tickBounded(t).New...)
		old := v2()
		passes = append(passes, old.New...)
		if len(old.New) != 7 || old.Live != 10 {
			t.Fatalf("v2 tick: %+v; want it past the cap it ignores", old)
		}
		if res := f.tickBounded(t); len(res.New) != 0 {
			t.Fatalf("v3 after v2 with %d live let in %d", old.Live, len(res.New))
		}
		f.expireLive(t)
		res := f.tickBounded(t)
		passes = append(passes, res.New...)
		if len(res.New) != 3 {
			t.Fatalf("v3 once v2's passes expired let in %d, want 3", len(res.New))
		}
		for i, a := range passes {
			if a.Pass.ID != int64(i+1) || a.Pass.User != "u"+strconv.Itoa(i+1) {
				t.Fatalf("pass %d went to %s with id %d, want id %d to u%d", i, a.Pass.User, a.Pass.ID, i+1, i+1)
			}
		}
	})
}

// TestMessage: the message to the line is set at creation, shown in every
// join and status answer, changed and cleared live.
func TestMessage(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 10)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 10, Message: "Doors open at noon", OpensAt: later})
		st, err := f.rooms.Join(ctx, f.id, "u1")
		if err != nil || st.Message != "Doors open at noon" {
			t.Fatalf("join: %+v, %v", st, err)
		}
		f.apply(t, Levers{Message: ptr("Ünïcode is fine — 10 left")})
		if st, err := f.rooms.Status(ctx, f.id, "u1", true); err != nil || st.Message != "Ünïcode is fine — 10 left" {
			t.Fatalf("status: %+v, %v", st, err)
		}
		f.apply(t, Levers{Message: ptr("")})
		if st, err := f.rooms.Status(ctx, f.id, "u1", true); err != nil || st.Message != "" || f.metaField(t, "msg") != "" {
			t.Fatalf("status after clearing: %+v, %v", st, err)
		}
	})
}

// TestLeversValidation: each lever is bounded, and a room must exist.
func TestLeversValidation(t *testing.T) {
	t.Parallel()
	f := setup(t, redistest.Topologies(t)[0], 10)
	ctx := context.Background()
	for _, l := range []Levers{
		{AdmitPerSecond: ptr(int64(0))}, {AdmitPerSecond: ptr(int64(MaxAdmitPerSecond + 1))},
		{MaxActive: ptr(int64(-1))}, {PowDifficulty: ptr(-1)}, {PowDifficulty: ptr(MaxPowDifficulty + 1)},
		{Message: ptr(strings.Repeat("é", MaxMessageLen+1))}, {Message: ptr("two\nlines")},
		{Message: ptr("bad \xff utf-8")},
	} {
		if err := f.rooms.Apply(ctx, f.id, l); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Apply(%+v) = %v, want a validation error", l, err)
		}
	}
	if err := f.rooms.Apply(ctx, f.id, Levers{Message: ptr(strings.Repeat("é", MaxMessageLen))}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Apply on a missing room: %v, want ErrNotFound", err)
	}
	if _, err := f.rooms.Open(ctx, f.id, Settings{PowDifficulty: MaxPowDifficulty + 1}); err == nil {
		t.Fatal("Open with too high a difficulty succeeded")
	}
}

// TestPreviousJoinAndStatusBesideThese: the previous release's join (v2)
// and status (v1) scripts on a room with a message and a proof of work, as
// during a rolling upgrade: they take no challenge and carry no message,
// as documented, and each reads the places the other gave.
func TestPreviousJoinAndStatusBesideThese(t *testing.T) {
	t.Parallel()
	join, err := os.ReadFile("testdata/join_v2.lua")
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("testdata/status_v1.lua")
	if err != nil {
		t.Fatal(err)
	}
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, classic(tp), 10)
		ctx := context.Background()
		k := f.rooms.Keys(f.id)
		old := func(src []byte, keys []string, args ...string) Standing {
			t.Helper()
			vals, err := f.c.Do(ctx, f.c.B().Eval().Script(string(src)).Numkeys(int64(len(keys))).Key(keys...).
				Arg(args...).Build()).ToArray()
			if err != nil {
				t.Fatal(err)
			}
			st, err := f.rooms.standing(f.id, args[0], vals)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		f.open(t, Settings{AdmitPerSecond: 10, Message: "hello", PowDifficulty: 4, OpensAt: later})
		if st := old(join, previousJoin(k), "u1"); st.Status != StatusWaiting || st.Place != 1 || st.Message != "" {
			t.Fatalf("previous join: %+v; want place 1, no challenge, no message", st)
		}
		_, err := f.rooms.Join(ctx, f.id, "u2")
		ce := challenged(t, err, ErrProofMissing, 4)
		st, err := f.rooms.JoinWithProof(ctx, f.id, "u2", Proof{ce.Challenge, solve(t, ce.Challenge, 4)}, 4)
		if err != nil || st.Place != 2 || st.Message != "hello" {
			t.Fatalf("join: %+v, %v", st, err)
		}
		if st := old(status, previousRoom(k), "u2", "1"); st.Status != StatusWaiting || st.Place != 2 || st.Message != "" {
			t.Fatalf("previous status of u2: %+v", st)
		}
		if st, err := f.rooms.Status(ctx, f.id, "u1", true); err != nil || st.Place != 1 || st.Message != "hello" {
			t.Fatalf("status of u1: %+v, %v", st, err)
		}
	})
}
