package waitroom

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/keyspace"
)

// previousScripts reads the previous releases' scripts from testdata, by
// name (testdata/<name>.lua).
func previousScripts(t *testing.T, names ...string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(names))
	for _, n := range names {
		src, err := os.ReadFile("testdata/" + n + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(src)
	}
	return out
}

// eval runs src with keys and args.
func (f fixture) eval(src string, keys []string, args ...string) rueidis.RedisResult {
	return f.c.Do(context.Background(), f.c.B().Eval().Script(src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
}

// dump reads every key of the room (DUMP, "" for a missing key), but the
// meta if withMeta is false.
func (f fixture) dump(t *testing.T, withMeta bool) map[string]string {
	t.Helper()
	k := f.rooms.Keys(f.id)
	out := map[string]string{}
	for _, key := range k.All() {
		if key == k.Meta() && !withMeta {
			continue
		}
		v, err := f.c.Do(context.Background(), f.c.B().Dump().Key(key).Build()).ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
		out[key] = v
	}
	return out
}

// sameDump fails t when a key differs between before and after.
func sameDump(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for key, v := range before {
		if after[key] != v {
			t.Fatalf("%s changed %s", what, key)
		}
	}
}

// previousCall is one call of a previous release's script on a room.
type previousCall struct {
	script string
	keys   func(k Keys) []string
	args   []string
}

// previousCalls are the calls of the previous releases' room scripts that
// must refuse a LayoutCompact room; every script that reads the room is
// there, each version still in testdata.
func previousCalls() []previousCall {
	join := func(k Keys) []string { return append(previousJoin(k), k.space.Key(keyspace.RoomSpentChallenge)) }
	batch := strconv.Itoa(DefaultTickBatch)
	return []previousCall{
		{"join_v3", join, []string{"u9", "0", "1"}},
		{"join_v2", join, []string{"u9"}},
		{"join_v1", previousRoom, []string{"u9"}},
		{"status_v2", previousRoom, []string{"u1", "1"}},
		{"status_v1", previousRoom, []string{"u1", "1"}},
		{"room_tick_v3", previousRoom, []string{batch, batch, "1000"}},
		{"room_tick_v2", previousRoom, []string{batch, batch, "1000"}},
		{"room_tick_v1", previousRoom, []string{batch, batch}},
		{"snapshot_v2", previousRoom, nil},
	}
}

// TestPreviousScriptsRefuseACompactRoom: the previous release knows only
// LayoutClassic. Its room scripts on a room this release created in
// LayoutCompact answer not_found (they read the meta's rate first, which
// that layout keeps in rate2), its check-in finds nobody waiting, its
// shuffle assigns nothing, and none of them changes a key: an instance of
// the previous release during a rolling upgrade answers 503 with
// Retry-After and gives the tick's lease up, never serves the room wrong.
func TestPreviousScriptsRefuseACompactRoom(t *testing.T) {
	t.Parallel()
	names := []string{"checkin_v1", "assign_v1"}
	for _, c := range previousCalls() {
		names = append(names, c.script)
	}
	src := previousScripts(t, names...)
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, tp, 10)
			f.open(t, Settings{AdmitPerSecond: 1000, OpensAt: hourAgo})
			users := f.join(t, 3)
			k := f.rooms.Keys(f.id)
			before := f.dump(t, true)
			for _, c := range previousCalls() {
				vals, err := f.eval(src[c.script], c.keys(k), c.args...).ToArray()
				if err != nil {
					t.Fatalf("%s: %v; want not_found", c.script, err)
				}
				if s, _ := vals[0].ToString(); len(vals) != 1 || s != "not_found" {
					t.Fatalf("%s answered %v; want not_found", c.script, vals)
				}
			}
			vals, err := f.eval(src["checkin_v1"], []string{k.Meta(), k.Place(), k.Seen()}, users...).AsIntSlice()
			if err == nil && slices.ContainsFunc(vals[1:], func(p int64) bool { return p != 0 }) {
				t.Fatalf("previous check-in: %v; want nobody waiting", vals)
			}
			n, err := f.eval(src["assign_v1"], []string{k.Meta(), k.Place(), k.ByPlace(), k.Shuffled(), k.Prequeue()},
				"0", "u1").AsInt64()
			if err == nil && n != -1 {
				t.Fatalf("previous assign: %d; want -1", n)
			}
			sameDump(t, "a previous script", before, f.dump(t, true))
			for i, u := range users {
				if st, err := f.rooms.Status(context.Background(), f.id, u, false); err != nil || st.Place != int64(i+1) {
					t.Fatalf("%s after the previous scripts: %+v, %v", u, st, err)
				}
			}
		})
	}
}

// TestPreviousLeverOnACompactRoom: the previous release's lever script
// knows no rate2, so a rate changed through it before the opening is
// written to rate. Until this release's next tick takes it as rate2, the
// previous scripts that then read the room as a LayoutClassic one fail on
// the marker keys before they write anything but what every tick writes.
func TestPreviousLeverOnACompactRoom(t *testing.T) {
	t.Parallel()
	src := previousScripts(t, "levers_v1", "join_v3", "status_v2", "room_tick_v3", "checkin_v1")
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, tp, 10)
			f.open(t, Settings{AdmitPerSecond: 1, OpensAt: later})
			users := f.join(t, 3)
			k := f.rooms.Keys(f.id)
			if err := f.eval(src["levers_v1"], []string{k.Meta()}, "1", "500", "0", "", "0", "", "0", "").Error(); err != nil {
				t.Fatal(err)
			}
			if f.metaField(t, "rate") != "500" {
				t.Fatal("the previous lever wrote no rate")
			}
			before := f.dump(t, false)
			batch := strconv.Itoa(DefaultTickBatch)
			calls := []previousCall{
				{"join_v3", func(k Keys) []string { return append(previousJoin(k), k.space.Key(keyspace.RoomSpentChallenge)) }, []string{"u9", "0", "1"}},
				{"status_v2", previousRoom, []string{"u1", "1"}},
				{"checkin_v1", func(k Keys) []string { return []string{k.Meta(), k.Place(), k.Seen()} }, users},
			}
			for _, c := range calls {
				if err := f.eval(src[c.script], c.keys(k), c.args...).Error(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
					t.Fatalf("%s: %v; want WRONGTYPE", c.script, err)
				}
			}
			f.startAdmission(t)
			wait.For(t, 5*time.Second, "the previous tick reaching a marker", func() bool {
				err := f.eval(src["room_tick_v3"], previousRoom(k), batch, batch, "1000").Error()
				return err != nil && strings.Contains(err.Error(), "WRONGTYPE")
			})
			sameDump(t, "a previous script", before, f.dump(t, false))
			res, _ := f.admitUntil(t, 3)
			if f.metaField(t, "rate2") != "500" || f.metaField(t, "rate") != "" {
				t.Fatalf("rate %q, rate2 %q after a tick; want rate2 500 alone", f.metaField(t, "rate"), f.metaField(t, "rate2"))
			}
			if res.Admitted != 3 || res.Skipped != 0 {
				t.Fatalf("tick: %+v; want the three users let in", res)
			}
		})
	}
}

// TestPreviousScriptsBesideTheseOnAClassicRoom: on a room the previous
// release created (LayoutClassic), its join, status, check-in, snapshot
// and tick scripts (testdata) and this release's run side by side, as
// during a rolling upgrade: places are handed out in one order whoever
// joins, each reads the check-ins of the other, and admission lets the
// users in once each, in order of place, whoever ticks: the previous
// release's tick (v3), this release's earlier one (v4) or this one, which
// tells the line's length on the way.
func TestPreviousScriptsBesideTheseOnAClassicRoom(t *testing.T) {
	t.Parallel()
	src := previousScripts(t, "join_v3", "status_v2", "checkin_v1", "snapshot_v2", "room_tick_v3", "room_tick_v4")
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, classic(tp), 100)
			f.open(t, Settings{AdmitPerSecond: 1000, OpensAt: later})
			ctx := context.Background()
			k := f.rooms.Keys(f.id)
			standing := func(script, user string, keys []string, args ...string) Standing {
				t.Helper()
				vals, err := f.eval(src[script], keys, append([]string{user}, args...)...).ToArray()
				if err != nil {
					t.Fatal(err)
				}
				st, err := f.rooms.standing(f.id, user, vals)
				if err != nil {
					t.Fatalf("%s of %s: %v", script, user, err)
				}
				return st
			}
			var users []string
			for i := 1; i <= 6; i++ {
				u := "u" + strconv.Itoa(i)
				users = append(users, u)
				var st Standing
				if i%2 == 1 {
					st = standing("join_v3", u, append(previousJoin(k), k.space.Key(keyspace.RoomSpentChallenge)), "0", "1")
				} else {
					st, _ = f.rooms.Join(ctx, f.id, u)
				}
				if st.Status != StatusWaiting || st.Place != int64(i) {
					t.Fatalf("join of %s: %+v; want place %d", u, st, i)
				}
			}
			if st := standing("status_v2", "u2", previousRoom(k), "1"); st.Place != 2 {
				t.Fatalf("previous status of u2: %+v", st)
			}
			if st, err := f.rooms.Status(ctx, f.id, "u1", true); err != nil || st.Place != 1 {
				t.Fatalf("status of u1: %+v, %v", st, err)
			}
			places, err := f.eval(src["checkin_v1"], []string{k.Meta(), k.Place(), k.Seen()}, users...).AsIntSlice()
			if err != nil || !slices.Equal(places[1:], []int64{1, 2, 3, 4, 5, 6}) {
				t.Fatalf("previous check-in: %v, %v", places, err)
			}
			got, err := f.rooms.checkIn(ctx, f.id, users, func(error) {})
			if err != nil || len(got.places) != 6 || got.places["u6"] != 6 {
				t.Fatalf("check-in: %+v, %v", got, err)
			}
			snap, err := decodeSnapshot(f.eval(src["snapshot_v2"], previousRoom(k)))
			if err != nil || snap.state != "open" || snap.rate != 1000 {
				t.Fatalf("previous snapshot: %+v, %v", snap, err)
			}
			f.startAdmission(t)
			var in []string
			batch := strconv.Itoa(2) // a few places a tick, so the scripts take turns
			turn := 0
			wait.For(t, 5*time.Second, "everyone let in", func() bool {
				turn++
				script, keys, head := src["room_tick_v3"], previousRoom(k), previousTickHead
				switch turn % 3 {
				case 1:
					script, keys = src["room_tick_v4"], k.room()
				case 2:
					script, keys, head = tickSource, k.room(), tickHead
				}
				vals, err := f.eval(script, keys, batch, batch, "1000").ToArray()
				if err != nil {
					t.Fatal(err)
				}
				state, _ := vals[0].ToString()
				res, err := f.rooms.decodeTickHead(f.id, state, vals, head)
				if err != nil {
					t.Fatal(err)
				}
				if head == tickHead && (res.Joined != 6 || res.Waiting != 6-res.Cursor) {
					t.Fatalf("tick: %+v; want 6 joined, %d waiting", res, 6-res.Cursor)
				}
				for _, a := range res.New {
					in = append(in, a.Pass.User)
				}
				return res.Admitted >= 6
			})
			if !slices.Equal(in, users) {
				t.Fatalf("let in %v; want %v", in, users)
			}
		})
	}
}

// TestLeverTakesThePreviousRate: a rate the previous release's lever wrote
// to a LayoutCompact room's rate is taken as its rate2 by this release's
// lever as by its tick, whatever the change asks for.
func TestLeverTakesThePreviousRate(t *testing.T) {
	t.Parallel()
	src := previousScripts(t, "levers_v1")
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, tp, 10)
			f.open(t, Settings{AdmitPerSecond: 1, OpensAt: later})
			if err := f.eval(src["levers_v1"], []string{f.rooms.Keys(f.id).Meta()}, "1", "500", "0", "", "0", "", "0", "").Error(); err != nil {
				t.Fatal(err)
			}
			msg := "hello"
			if err := f.rooms.Apply(context.Background(), f.id, Levers{Message: &msg}); err != nil {
				t.Fatal(err)
			}
			if f.metaField(t, "rate2") != "500" || f.metaField(t, "rate") != "" || f.metaField(t, "msg") != "hello" {
				t.Fatalf("rate %q, rate2 %q, msg %q; want rate2 500 alone and the message", f.metaField(t, "rate"),
					f.metaField(t, "rate2"), f.metaField(t, "msg"))
			}
		})
	}
}

// TestTickV4BesideV5: this release's earlier tick script (v4,
// testdata/room_tick_v4.lua) and this one tick one room side by side, in
// either layout, through a prequeue: either seals it, the users are let in
// once each with passes numbered in turn, and each tick of this version
// tells the line's length as Counts reads it — the prequeue's users while
// it is open, then the places admission has not reached.
func TestTickV4BesideV5(t *testing.T) {
	t.Parallel()
	src := previousScripts(t, "room_tick_v4")
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 100)
		ctx := context.Background()
		f.openPrequeue(t, Settings{AdmitPerSecond: 1000})
		f.join(t, 5)
		batch := strconv.Itoa(2) // a few places a tick, so both scripts take turns
		tick := func(v4 bool) (TickResult, bool) {
			t.Helper()
			script, head := tickSource, tickHead
			if v4 {
				script, head = src["room_tick_v4"], previousTickHead
			}
			vals, err := f.eval(script, f.rooms.Keys(f.id).room(), batch, batch, "1000").ToArray()
			if err != nil {
				t.Fatal(err)
			}
			state, _ := vals[0].ToString()
			if state == "shuffle" {
				if err := f.rooms.shuffle(ctx, f.id); err != nil {
					t.Fatal(err)
				}
				return TickResult{}, false
			}
			res, err := f.rooms.decodeTickHead(f.id, state, vals, head)
			if err != nil {
				t.Fatal(err)
			}
			if !v4 {
				c, err := f.rooms.Counts(ctx, f.id)
				if err != nil {
					t.Fatal(err)
				}
				if res.Joined != c.Joined || res.Waiting != c.Waiting {
					t.Fatalf("tick: %+v; the room's counts %+v", res, c)
				}
			}
			return res, true
		}
		tick(true)
		if res, _ := tick(false); res.Joined != 0 || res.Waiting != 5 {
			t.Fatalf("tick during the prequeue: %+v; want its 5 users waiting, no place handed out", res)
		}
		f.startAdmission(t)
		if _, ok := tick(true); ok {
			t.Fatal("v4's first tick after the opening did not seal the prequeue")
		}
		for i := 6; i <= 8; i++ {
			if _, err := f.rooms.Join(ctx, f.id, "u"+strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
		in := map[string]bool{}
		var passes []int64
		turn := 0
		wait.For(t, 5*time.Second, "everyone let in", func() bool {
			turn++
			res, ok := tick(turn%2 == 0)
			if !ok {
				t.Fatal("a tick found the prequeue to shuffle again")
			}
			if turn%2 == 1 && (res.Joined != 8 || res.Waiting != 8-res.Cursor) {
				t.Fatalf("tick: %+v; want 8 joined, %d waiting", res, 8-res.Cursor)
			}
			for _, a := range res.New {
				if in[a.Pass.User] {
					t.Fatalf("%s let in twice", a.Pass.User)
				}
				in[a.Pass.User] = true
				passes = append(passes, a.Pass.ID)
			}
			return res.Admitted >= 8
		})
		if res, _ := tick(false); res.Admitted != 8 || res.Waiting != 0 || len(in) != 8 ||
			!slices.Equal(passes, []int64{1, 2, 3, 4, 5, 6, 7, 8}) {
			t.Fatalf("after admission: %+v, let in %v with passes %v", res, in, passes)
		}
	})
}
