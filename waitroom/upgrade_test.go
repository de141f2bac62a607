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

	"github.com/dibsio/dibs/internal/redistest"
	"github.com/dibsio/dibs/internal/wait"
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
// users in once each, in order of place, whoever ticks.
func TestPreviousScriptsBesideTheseOnAClassicRoom(t *testing.T) {
	t.Parallel()
	src := previousScripts(t, "join_v3", "status_v2", "checkin_v1", "snapshot_v2", "room_tick_v3")
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
			batch := strconv.Itoa(2) // a few places a tick, so both scripts take turns
			turn := 0
			wait.For(t, 5*time.Second, "everyone let in", func() bool {
				turn++
				script, keys := src["room_tick_v3"], previousRoom(k)
				if turn%2 == 0 {
					script, keys = tickSource, k.room()
				}
				vals, err := f.eval(script, keys, batch, batch, "1000").ToArray()
				if err != nil {
					t.Fatal(err)
				}
				state, _ := vals[0].ToString()
				res, err := f.rooms.decodeTick(f.id, state, vals)
				if err != nil {
					t.Fatal(err)
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
