package waitroom

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// sameAsScript reads a snapshot of f's room and checks that it answers
// every user who waits beyond its cursor (places: the users' places) as
// the status script does right after: the same standing but Now. It
// returns how many users it answered.
func (f fixture) sameAsScript(t *testing.T, what string, places map[string]int64) int {
	t.Helper()
	ctx := context.Background()
	snap, err := f.rooms.readSnapshot(ctx, f.id)
	if err != nil {
		t.Fatalf("%s: snapshot: %v", what, err)
	}
	answered := 0
	for u, place := range places {
		want, err := f.rooms.Status(ctx, f.id, u, false)
		if err != nil {
			t.Fatalf("%s: status of %s: %v", what, u, err)
		}
		got, ok := snap.answer(place)
		switch {
		case !ok && want.Status == StatusWaiting:
			t.Fatalf("%s: %s waits at %d (script %+v), the snapshot (cursor %d) cannot answer", what, u, place, want, snap.cursor)
		case !ok && place > snap.cursor:
			t.Fatalf("%s: %s at %d beyond the cursor %d not answered; script: %+v", what, u, place, snap.cursor, want)
		case !ok:
			continue
		}
		got.Now = want.Now
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %s at %d:\nsnapshot %+v\nscript   %+v", what, u, place, got, want)
		}
		answered++
	}
	return answered
}

// TestSnapshotAnswersAsTheScript: under joins, ticks that admit, a measured
// rate, a pause, sold out and the end, a snapshot of the room answers every
// waiting user exactly as the status script does at the snapshot's cursor.
func TestSnapshotAnswersAsTheScript(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 6)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 1000, OpensAt: later})
		places := map[string]int64{}
		joinAll := func(prefix string, n int) {
			for i := range n {
				u := prefix + strconv.Itoa(i+1)
				st, err := f.rooms.Join(ctx, f.id, u)
				if err != nil {
					t.Fatal(err)
				}
				places[u] = st.Place
			}
		}
		joinAll("u", 30)
		if n := f.sameAsScript(t, "before admission", places); n != 30 {
			t.Fatalf("answered %d of 30", n)
		}
		if err := f.c.Do(ctx, f.c.B().Hset().Key(f.rooms.Keys(f.id).Meta()).FieldValue().
			FieldValue("m_rate", "2.5").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		f.sameAsScript(t, "a measured rate", places)
		msg := "Doors open at noon"
		if err := f.rooms.Apply(ctx, f.id, Levers{Message: &msg}); err != nil {
			t.Fatal(err)
		}
		if n := f.sameAsScript(t, "a message to the line", places); n != 30 {
			t.Fatalf("answered %d of 30 with the message", n)
		}
		f.startAdmission(t)
		_, tokens := f.admitUntil(t, 2)
		f.sameAsScript(t, "two admitted", places)
		joinAll("v", 5)
		res, err := f.rooms.Tick(ctx, f.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range res.New {
			tokens[a.Pass.User] = a.Token
		}
		f.sameAsScript(t, "joins after admission", places)
		f.pause(t, true)
		f.sameAsScript(t, "paused", places)
		f.pause(t, false)
		_, more := f.admitUntil(t, 6)
		for u, tok := range more {
			tokens[u] = tok
		}
		f.sameAsScript(t, "every unit promised", places)
		for u, tok := range tokens {
			f.claimWith(t, u, tok)
		}
		var snap snapshot
		snap, err = f.rooms.readSnapshot(ctx, f.id)
		if err != nil || snap.state != "sold_out" {
			t.Fatalf("after every unit was claimed: %+v, %v", snap, err)
		}
		if n := f.sameAsScript(t, "sold out", places); n != 35-6 {
			t.Fatalf("answered %d sold out, want 29", n)
		}
		if err := f.c.Do(ctx, f.c.B().Hset().Key(f.rooms.Keys(f.id).ClaimMeta()).FieldValue().
			FieldValue("closed", "1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		f.sameAsScript(t, "ended", places)
	})
}

// TestSnapshotAnswer: what a snapshot answers by itself, and what it leaves
// to the script.
func TestSnapshotAnswer(t *testing.T) {
	t.Parallel()
	open := snapshot{state: "open", now: 1000, cursor: 10, remaining: 5, live: 2, rate: 2, abandon: time.Minute}
	for _, c := range []struct {
		name  string
		s     snapshot
		place int64
		want  Standing
		ok    bool
	}{
		{"waiting", open, 13, Standing{Status: StatusWaiting, Place: 13, Position: 3,
			Wait: EstimateWait(3, 2, 0), StockExpectedToLast: true}, true},
		{"beyond the stock", open, 14, Standing{Status: StatusWaiting, Place: 14, Position: 4,
			Wait: EstimateWait(4, 2, 0)}, true},
		{"next", open, 11, Standing{Status: StatusWaiting, Place: 11, Position: 1,
			Wait: EstimateWait(1, 2, 0), StockExpectedToLast: true}, true},
		{"reached by admission", open, 10, Standing{}, false},
		{"paused", snapshot{state: "paused", cursor: 10, rate: 2}, 12, Standing{Status: StatusWaiting, Place: 12,
			Position: 2, Wait: EstimateWait(2, 2, 0), Paused: true}, true},
		{"sold out", snapshot{state: "sold_out", cursor: 10}, 12, Standing{Status: StatusSoldOut}, true},
		{"ended", snapshot{state: "ended", cursor: 10}, 12, Standing{Status: StatusEnded}, true},
		{"ended, reached", snapshot{state: "ended", cursor: 10}, 9, Standing{}, false},
		{"room gone", snapshot{state: "not_found"}, 12, Standing{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := c.s.answer(c.place)
			if ok {
				c.want.Now = time.UnixMilli(c.s.now).UTC()
			}
			if ok != c.ok || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("answer(%d) = %+v, %v; want %+v, %v", c.place, got, ok, c.want, c.ok)
			}
		})
	}
}

// TestWatcherStatusFromSnapshot: once a user's place is known, lookups are
// answered from the room's snapshot, and the check-ins written in batches
// with the room's reads keep the user's place through several abandonment
// times; a user never looked up is skipped as abandoned, and the admitted
// user's next lookup gets the token from the script.
func TestWatcherStatusFromSnapshot(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 5)
		abandon := 400 * time.Millisecond
		f.open(t, Settings{OpensAt: later, AbandonAfter: abandon})
		users := f.join(t, 2)
		w := startWatcher(t, f.rooms, WatcherConfig{Refresh: time.Hour})
		ctx := context.Background()
		seen := func() int64 { return f.seenOf(t, users[1]) }
		first := seen()
		wait.For(t, 10*time.Second, "lookups past 3 × abandon_after", func() bool {
			st, err := w.Status(ctx, f.id, users[1])
			if err != nil || st.Status != StatusWaiting || st.Position != 2 {
				t.Fatalf("lookup: %+v, %v", st, err)
			}
			return seen() > first+3*abandon.Milliseconds() && w.Stats().FromSnapshot > 0
		})
		f.startAdmission(t)
		res, _ := f.admitUntil(t, 1)
		if res.Skipped != 1 {
			t.Fatalf("tick: %+v; want u1 skipped as abandoned, u2 admitted", res)
		}
		wait.For(t, 10*time.Second, "u2's token", func() bool {
			st, err := w.Status(ctx, f.id, users[1])
			if err != nil {
				t.Fatal(err)
			}
			return st.Status == StatusAdmitted && st.Token != ""
		})
		if st, err := w.Status(ctx, f.id, users[0]); err != nil || st.Status != StatusAbandoned {
			t.Fatalf("u1: %+v, %v", st, err)
		}
	})
}

// TestWatchSoldOutInOneRead: every watch of a waiting user gets sold_out
// from the one read that follows the room's hint.
func TestWatchSoldOutInOneRead(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 5)
		f.open(t, Settings{OpensAt: later})
		users := f.join(t, 20)
		w := startWatcher(t, f.rooms, WatcherConfig{Refresh: time.Hour})
		ctx := context.Background()
		var watches []*Watch
		for _, u := range users {
			s := f.watch(t, w, u) // watch, then read: as a stream does
			if st, err := w.Status(ctx, f.id, u); err != nil || st.Status != StatusWaiting {
				t.Fatalf("%s: %+v, %v", u, st, err)
			}
			watches = append(watches, s)
		}
		f.subscribed(t, 1)
		if err := f.c.Do(ctx, f.c.B().Hset().Key(f.rooms.Keys(f.id).ClaimMeta()).FieldValue().
			FieldValue("stock", "0").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if err := f.rooms.hint(ctx, f.id, TickResult{State: "sold_out"}); err != nil {
			t.Fatal(err)
		}
		for i, s := range watches {
			if st := nextUntil(t, s, "sold out", func(st Standing) bool { return st.Status.Final() }); st.Status != StatusSoldOut {
				t.Fatalf("%s: %+v", users[i], st)
			}
		}
	})
}

// TestWatcherUsersBound: past WatcherConfig.Users a room's further users
// are answered by the script, every time, and nothing more is kept.
func TestWatcherUsersBound(t *testing.T) {
	t.Parallel()
	f := setup(t, redistest.Topologies(t)[0], 5)
	f.open(t, Settings{OpensAt: later})
	users := f.join(t, 2)
	w := startWatcher(t, f.rooms, WatcherConfig{Refresh: time.Hour, Users: 1})
	ctx := context.Background()
	wait.For(t, 10*time.Second, "u1 answered from the snapshot", func() bool {
		if _, err := w.Status(ctx, f.id, users[0]); err != nil {
			t.Fatal(err)
		}
		return w.Stats().FromSnapshot > 0
	})
	before := w.Stats()
	for range 3 {
		if st, err := w.Status(ctx, f.id, users[1]); err != nil || st.Position != 2 {
			t.Fatalf("u2: %+v, %v", st, err)
		}
	}
	if got := w.Stats(); got.FromScript != before.FromScript+3 || got.FromSnapshot != before.FromSnapshot {
		t.Fatalf("stats %+v after %+v: want 3 more from the script", got, before)
	}
}
