package waitroom

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// classicSuffix ends the name of a topology whose fixtures open rooms in
// LayoutClassic.
const classicSuffix = "-classic"

// classic returns tp for fixtures that open their rooms in LayoutClassic,
// the previous release's layout.
func classic(tp redistest.Topology) redistest.Topology {
	if !strings.HasSuffix(tp.Name, classicSuffix) {
		tp.Name += classicSuffix
	}
	return tp
}

// layoutOf is the layout the fixtures on tp open rooms in.
func layoutOf(tp redistest.Topology) Layout {
	if strings.HasSuffix(tp.Name, classicSuffix) {
		return LayoutClassic
	}
	return LayoutCompact
}

// previousRoom lists the keys the previous release's room scripts take
// (testdata/*_v<n>.lua but join's): Keys.room without User, Line and
// Shuffled.
func previousRoom(k Keys) []string { return k.room()[:11] }

// previousJoin lists the keys the previous release's join scripts take.
func previousJoin(k Keys) []string {
	return append(previousRoom(k), k.ClaimByUser(), k.ClaimUsers())
}

// layout reads the layout of the fixture's room.
func (f fixture) layout(t *testing.T) Layout {
	t.Helper()
	v, err := f.c.Do(context.Background(), f.c.B().Hget().Key(f.rooms.Keys(f.id).Meta()).Field("layout").Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	if v == "2" {
		return LayoutCompact
	}
	return LayoutClassic
}

// rateField names the meta field that holds the rate of the fixture's
// room.
func (f fixture) rateField(t *testing.T) string {
	t.Helper()
	if f.layout(t) == LayoutCompact {
		return "rate2"
	}
	return "rate"
}

// entryOf reads user's place and latest check-in (ms) as the room keeps
// them, in either layout; ok is false when the room keeps neither.
func (f fixture) entryOf(t *testing.T, user string) (place, seen int64, ok bool) {
	t.Helper()
	ctx := context.Background()
	k := f.rooms.Keys(f.id)
	if f.layout(t) == LayoutCompact {
		v, err := f.c.Do(ctx, f.c.B().Hget().Key(k.User()).Field(user).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			return 0, 0, false
		}
		if err != nil {
			t.Fatal(err)
		}
		p, s, found := strings.Cut(v, ":")
		place, err1 := strconv.ParseInt(p, 36, 64)
		seen, err2 := strconv.ParseInt(s, 36, 64)
		if !found || err1 != nil || err2 != nil {
			t.Fatalf("entry of %s: %q", user, v)
		}
		return place, seen, true
	}
	res := f.c.DoMulti(ctx, f.c.B().Hget().Key(k.Place()).Field(user).Build(),
		f.c.B().Hget().Key(k.Seen()).Field(user).Build())
	place, err1 := res[0].AsInt64()
	seen, err2 := res[1].AsInt64()
	for _, err := range []error{err1, err2} {
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
	}
	return place, seen, err1 == nil || err2 == nil
}

// seenOf reads user's latest check-in (ms), 0 if none.
func (f fixture) seenOf(t *testing.T, user string) int64 {
	t.Helper()
	_, seen, _ := f.entryOf(t, user)
	return seen
}

// setSeen records user's latest check-in as ms, in either layout, keeping
// the user's place.
func (f fixture) setSeen(t *testing.T, user string, ms int64) {
	t.Helper()
	ctx := context.Background()
	k := f.rooms.Keys(f.id)
	cmd := f.c.B().Hset().Key(k.Seen()).FieldValue().FieldValue(user, strconv.FormatInt(ms, 10)).Build()
	if f.layout(t) == LayoutCompact {
		place, _, _ := f.entryOf(t, user)
		v := strconv.FormatInt(place, 36) + ":" + strconv.FormatInt(ms, 36)
		cmd = f.c.B().Hset().Key(k.User()).FieldValue().FieldValue(user, v).Build()
	}
	if err := f.c.Do(ctx, cmd).Error(); err != nil {
		t.Fatal(err)
	}
}

// placesOf reads the place of every user who holds one, in either layout
// (in LayoutCompact, abandoned users passed by admission keep theirs).
func (f fixture) placesOf(t *testing.T) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	k := f.rooms.Keys(f.id)
	compact := f.layout(t) == LayoutCompact
	key := k.Place()
	if compact {
		key = k.User()
	}
	m, err := f.c.Do(ctx, f.c.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int64, len(m))
	for u, v := range m {
		base := 10
		if compact {
			v, _, _ = strings.Cut(v, ":")
			base = 36
		}
		p, err := strconv.ParseInt(v, base, 64)
		if err != nil {
			t.Fatalf("place of %s: %q", u, v)
		}
		if p > 0 {
			out[u] = p
		}
	}
	return out
}

// TestPassedPlaceStaysPassed: a user skipped as abandoned is not waiting
// again when the room's abandonment time is raised afterwards (in
// LayoutCompact the user's entry stays, its place behind the cursor): the
// status answers abandoned, a check-in finds no place, and joining again
// takes a new place at the back.
func TestPassedPlaceStaysPassed(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 10)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 1000, AbandonAfter: time.Minute, OpensAt: later})
		f.join(t, 2)
		f.silentFor(t, "u1", 10*time.Minute)
		f.startAdmission(t)
		if res, _ := f.admitUntil(t, 1); res.Skipped != 1 || res.New[0].Pass.User != "u2" {
			t.Fatalf("tick: %+v; want u1 skipped, u2 let in", res)
		}
		f.open(t, Settings{AdmitPerSecond: 1000, AbandonAfter: time.Hour})
		if st, err := f.rooms.Status(ctx, f.id, "u1", true); err != nil || st.Status != StatusAbandoned {
			t.Fatalf("u1 after a longer abandonment time: %+v, %v; want abandoned", st, err)
		}
		if got, err := f.rooms.checkIn(ctx, f.id, []string{"u1"}, func(error) {}); err != nil || got.places["u1"] != 0 {
			t.Fatalf("check-in of u1: %+v, %v; want no place", got, err)
		}
		if st, err := f.rooms.Join(ctx, f.id, "u1"); err != nil || st.Status != StatusWaiting || st.Place != 3 {
			t.Fatalf("u1 joining again: %+v, %v; want place 3", st, err)
		}
	})
}

// previousTickHead is the values of the previous tick scripts' replies
// (v1–v4) before the users they let in.
const previousTickHead = 8
