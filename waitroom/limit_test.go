package waitroom

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// hourAgo is an opening an hour past; tickBounded moves the room's clock a
// second on before each tick, so admission is bounded by the stock alone.
var hourAgo = time.Now().Add(-time.Hour)

// tickBounded ticks once and checks that admission promised no more units
// than remain: the live passes never exceed the stock not yet taken, and
// every pass handed out is spent, expired or live. The tick comes a second
// after the last (the room's open_ms moves back by one), so its allowance,
// a second's worth at 1000/s, never holds admission back.
func (f fixture) tickBounded(t *testing.T) TickResult {
	t.Helper()
	ctx := context.Background()
	f.shift(t, 1000)
	res, err := f.rooms.Tick(ctx, f.id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Live > res.Remaining {
		t.Fatalf("tick promised %d live passes with %d units remaining: %+v", res.Live, res.Remaining, res)
	}
	cn, err := f.rooms.Counts(ctx, f.id)
	if err != nil {
		t.Fatal(err)
	}
	if cn.Admitted-cn.PassesSpent-cn.PassesExpired != res.Live {
		t.Fatalf("counts %+v do not add up to %d live passes", cn, res.Live)
	}
	return res
}

// admittedNow ticks once and returns the users it let in, in order, and
// their tokens.
func (f fixture) admittedNow(t *testing.T) ([]string, map[string]string) {
	t.Helper()
	var users []string
	tokens := map[string]string{}
	for _, a := range f.tickBounded(t).New {
		users = append(users, a.Pass.User)
		tokens[a.Pass.User] = a.Token
	}
	return users, tokens
}

// joinAt joins user and checks that the user waits at place.
func (f fixture) joinAt(t *testing.T, user string, place int64) {
	t.Helper()
	st, err := f.rooms.Join(context.Background(), f.id, user)
	if err != nil || st.Status != StatusWaiting || st.Place != place {
		t.Fatalf("%s joining: %+v, %v; want waiting at place %d", user, st, err, place)
	}
}

// TestUserBelowTheLimitJoinsAgain: with a per-user limit above 1, a user
// whose pass was spent takes a new place at the back while below the limit
// (each pass one of the user's claims, counted as the claim script counts
// them, in either layout), and is answered used at the limit; admission
// still never promises more units than remain.
func TestUserBelowTheLimitJoinsAgain(t *testing.T) {
	t.Parallel()
	for _, layout := range []claim.Layout{claim.LayoutCompact, claim.LayoutClassic} {
		t.Run(layout.String(), func(t *testing.T) {
			t.Parallel()
			eachTopology(t, func(t *testing.T, tp redistest.Topology) {
				f := setupLimit(t, tp, 3, 3, layout)
				ctx := context.Background()
				f.open(t, Settings{AdmitPerSecond: 1000, OpensAt: hourAgo})
				f.join(t, 2)
				in, tokens := f.admittedNow(t)
				if len(in) != 2 {
					t.Fatalf("first tick let in %v, want u1 and u2", in)
				}
				f.claimWith(t, "u1", tokens["u1"])

				// u1 (one claim of three) joins again at the back, behind
				// nobody; u3 joins behind u1. Three units, one taken, one
				// held by u2's pass: one more may be promised, to u1.
				f.joinAt(t, "u1", 3)
				f.joinAt(t, "u3", 4)
				in, next := f.admittedNow(t)
				if len(in) != 1 || in[0] != "u1" {
					t.Fatalf("second tick let in %v, want u1 alone", in)
				}
				if _, err := f.rooms.Spend(ctx, f.id, "u1", tokens["u1"]); !errors.Is(err, ErrSpent) {
					t.Fatalf("u1's first pass again: %v, want ErrSpent", err)
				}
				f.claimWith(t, "u1", next["u1"])

				// Two claims of three: a third place, but the unit left is
				// u2's, so nobody is let in.
				f.joinAt(t, "u1", 5)
				if in, _ := f.admittedNow(t); len(in) != 0 {
					t.Fatalf("tick with every unit taken or promised let in %v", in)
				}
				if st, err := f.rooms.Status(ctx, f.id, "u3", true); err != nil || st.Position != 1 || st.StockExpectedToLast {
					t.Fatalf("u3: %+v, %v; want first, stock not expected to last", st, err)
				}
				f.claimWith(t, "u2", tokens["u2"])
				if st, err := f.rooms.Status(ctx, f.id, "u1", true); err != nil || st.Status != StatusSoldOut {
					t.Fatalf("u1 waiting once sold out: %+v, %v", st, err)
				}

				// Two units come back: u3 and u1 are let in, in order.
				if err := f.c.Do(ctx, f.c.B().Hincrby().Key(f.rooms.Keys(f.id).ClaimMeta()).Field("voided").Increment(2).Build()).Error(); err != nil {
					t.Fatal(err)
				}
				in, last := f.admittedNow(t)
				if len(in) != 2 || in[0] != "u3" || in[1] != "u1" {
					t.Fatalf("tick after two units came back let in %v, want u3 then u1", in)
				}
				f.claimWith(t, "u1", last["u1"])

				// At the limit: used, as with a limit of 1, and no place.
				st, err := f.rooms.Join(ctx, f.id, "u1")
				if err != nil || st.Status != StatusUsed || st.Place != 0 {
					t.Fatalf("u1 joining with three claims: %+v, %v; want used", st, err)
				}
				if p, _ := f.rooms.Verify(f.id, "u1", last["u1"]); st.Pass.ID != p.ID {
					t.Fatalf("u1's used pass %d, want the last one, %d", st.Pass.ID, p.ID)
				}
				if cn, err := f.rooms.Counts(ctx, f.id); err != nil || cn.Joined != 5 || cn.PassesSpent != 4 {
					t.Fatalf("counts %+v, %v; want 5 places and 4 passes spent", cn, err)
				}
			})
		})
	}
}

// TestUsedBelowTheLimitOnceSoldOut: a user below the limit whose pass was
// spent gets no place once nothing is left, as any newcomer.
func TestUsedBelowTheLimitOnceSoldOut(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setupLimit(t, tp, 1, 2, claim.LayoutDefault)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 1000, OpensAt: hourAgo})
		f.join(t, 1)
		_, tokens := f.admittedNow(t)
		f.claimWith(t, "u1", tokens["u1"])
		if _, err := f.rooms.Join(ctx, f.id, "u1"); !errors.Is(err, ErrSoldOut) {
			t.Fatalf("u1 joining again once sold out: %v, want ErrSoldOut", err)
		}
		if st, err := f.rooms.Status(ctx, f.id, "u1", false); err != nil || st.Status != StatusUsed {
			t.Fatalf("u1's status: %+v, %v; want used", st, err)
		}
	})
}

// TestUsedWithALimitOfOne: with a per-user limit of 1, a user whose pass
// was spent is answered used by every join and takes no place.
func TestUsedWithALimitOfOne(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 5)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 1000, OpensAt: hourAgo})
		f.join(t, 1)
		_, tokens := f.admittedNow(t)
		f.claimWith(t, "u1", tokens["u1"])
		for range 2 {
			st, err := f.rooms.Join(ctx, f.id, "u1")
			if err != nil || st.Status != StatusUsed || st.Token != "" {
				t.Fatalf("u1 joining after the claim: %+v, %v; want used", st, err)
			}
		}
		if cn, err := f.rooms.Counts(ctx, f.id); err != nil || cn.Joined != 1 || cn.Waiting != 0 {
			t.Fatalf("counts %+v, %v; want one place, nobody waiting", cn, err)
		}
	})
}

// TestPreviousJoinBesideThisOne runs the previous release's join script
// (testdata/join_v1.lua, unnamed) beside this one on one room, as during a
// rolling upgrade: it answers used where this one gives a user below the
// limit a new place, and each reads what the other wrote.
func TestPreviousJoinBesideThisOne(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("testdata/join_v1.lua")
	if err != nil {
		t.Fatal(err)
	}
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setupLimit(t, classic(tp), 5, 3, claim.LayoutDefault)
		ctx := context.Background()
		k := f.rooms.Keys(f.id)
		old := func(user string) Standing {
			t.Helper()
			vals, err := f.c.Do(ctx, f.c.B().Eval().Script(string(src)).Numkeys(int64(len(previousRoom(k)))).Key(previousRoom(k)...).
				Arg(user).Build()).ToArray()
			if err != nil {
				t.Fatal(err)
			}
			st, err := f.rooms.standing(f.id, user, vals)
			if err != nil {
				t.Fatalf("previous join of %s: %v", user, err)
			}
			return st
		}
		f.open(t, Settings{AdmitPerSecond: 1000, OpensAt: hourAgo})
		f.joinAt(t, "u1", 1)
		_, tokens := f.admittedNow(t)
		f.claimWith(t, "u1", tokens["u1"])
		if st := old("u1"); st.Status != StatusUsed {
			t.Fatalf("previous join of u1 after a claim: %+v; want used", st)
		}
		f.joinAt(t, "u1", 2)
		if st := old("u1"); st.Status != StatusWaiting || st.Place != 2 {
			t.Fatalf("previous join of u1 waiting again: %+v; want place 2", st)
		}
		if st := old("u2"); st.Status != StatusWaiting || st.Place != 3 {
			t.Fatalf("previous join of u2: %+v; want place 3", st)
		}
		f.joinAt(t, "u2", 3)
		in, next := f.admittedNow(t)
		if len(in) != 2 || in[0] != "u1" || in[1] != "u2" {
			t.Fatalf("tick let in %v, want u1 then u2", in)
		}
		if st := old("u1"); st.Status != StatusAdmitted || st.Token != next["u1"] {
			t.Fatalf("previous join of u1 once admitted: %+v; want its second pass", st)
		}
		f.claimWith(t, "u1", next["u1"])
		if cn, err := f.rooms.Counts(ctx, f.id); err != nil || cn.Joined != 3 || cn.PassesSpent != 2 {
			t.Fatalf("counts %+v, %v; want 3 places, 2 passes spent", cn, err)
		}
	})
}
