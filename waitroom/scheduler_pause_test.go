package waitroom

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// pause pauses (true) or resumes (false) promotion id's claims the way
// promotion.Manager.Patch does.
func (f fixture) pause(t *testing.T, paused bool) {
	t.Helper()
	ctx := context.Background()
	pt, _, err := f.gate.BeginPatch(ctx, f.id, claim.Change{Paused: &paused, Reopen: true}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pt.Apply(ctx); err != nil {
		t.Fatal(err)
	}
}

// metaInt reads a field of the room's meta hash, 0 when missing.
func (f fixture) metaInt(t *testing.T, field string) int64 {
	t.Helper()
	v, err := f.c.Do(context.Background(), f.c.B().Hget().Key(f.rooms.Keys(f.id).Meta()).Field(field).Build()).AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	return v
}

// TestTickPausedAdmitsNobodyAndNeverCatchesUp pauses a room's promotion,
// lets a minute of pause go by (moved into the past, since Redis TIME
// cannot be faked), and resumes it: no paused tick admits anyone, the
// resume is no burst (the allowance counts only the time the promotion
// was not paused), and admission goes on from the place it stopped at.
func TestTickPausedAdmitsNobodyAndNeverCatchesUp(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		const rate = 20
		f := setup(t, tp, 1000)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: rate, OpensAt: later})
		users := f.join(t, 60)
		open := f.startAdmission(t)
		first, _ := f.admitUntil(t, 1)

		last := users[len(users)-1]
		if st, err := f.rooms.Status(ctx, f.id, last, true); err != nil || st.Status != StatusWaiting || st.Paused {
			t.Fatalf("status before the pause: %+v, %v; want waiting, not paused", st, err)
		}
		f.pause(t, true)
		if st, err := f.rooms.Status(ctx, f.id, last, true); err != nil || st.Status != StatusWaiting || !st.Paused {
			t.Fatalf("status while paused: %+v, %v; want waiting and paused", st, err)
		}
		if st, err := f.rooms.Join(ctx, f.id, "late-joiner"); err != nil || st.Status != StatusWaiting || !st.Paused {
			t.Fatalf("join while paused: %+v, %v; want a place, paused", st, err)
		}
		for range 3 {
			res, err := f.rooms.Tick(ctx, f.id)
			if err != nil {
				t.Fatal(err)
			}
			if res.State != "paused" || len(res.New) != 0 || res.Admitted != first.Admitted || res.Cursor != first.Cursor {
				t.Fatalf("paused tick: %+v, want state paused and nobody let in (admitted %d, cursor %d)", res, first.Admitted, first.Cursor)
			}
		}
		heldMS := f.metaInt(t, "held_ms")
		if heldMS == 0 {
			t.Fatal("a paused tick recorded no held_ms")
		}
		// A minute of pause: the opening and the pause's start a minute
		// earlier, so a minute more has passed since both.
		const pausedFor = 60_000
		k := f.rooms.Keys(f.id)
		for _, field := range []string{"open_ms", "held_ms"} {
			if err := f.c.Do(ctx, f.c.B().Hincrby().Key(k.Meta()).Field(field).Increment(-pausedFor).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		open -= pausedFor

		f.pause(t, false)
		if st, err := f.rooms.Status(ctx, f.id, last, true); err != nil || st.Paused {
			t.Fatalf("status after the resume: %+v, %v; want not paused", st, err)
		}
		res, err := f.rooms.Tick(ctx, f.id)
		if err != nil {
			t.Fatal(err)
		}
		// The time not paused: from the opening to the pause's first tick,
		// and from the resume on; at most now − opening − the pause.
		notPaused := res.Now - open - pausedFor
		if res.State != "open" || res.Allowed > rate*notPaused/1000 || res.Admitted > res.Allowed {
			t.Fatalf("first tick after the resume: %+v; want at most %d allowed (%d ms not paused), not the %d a minute more would give",
				res, rate*notPaused/1000, notPaused, rate*(res.Now-open)/1000)
		}
		if got := f.metaInt(t, "held_ms"); got != 0 {
			t.Fatalf("held_ms %d after the resume, want it gone", got)
		}
		if got := f.metaInt(t, "open_ms"); got < open+pausedFor {
			t.Fatalf("open_ms %d, want it moved on by the pause to at least %d", got, open+pausedFor)
		}

		// Admission goes on in order of place from where it stopped.
		var order []string
		wait.For(t, 10*time.Second, "every user admitted after the resume", func() bool {
			res, err := f.rooms.Tick(ctx, f.id)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range res.New {
				order = append(order, a.Pass.User)
			}
			return res.Admitted >= int64(len(users))
		})
		if want := users[first.Admitted:]; !slices.Equal(order, want) {
			t.Fatalf("admitted after the resume %v, want %v", order, want)
		}
	})
}

// TestSchedulerSkipsPausedRoom runs the scheduler over a room whose
// promotion is paused: rounds go by and nobody is let in; once resumed,
// the scheduler lets users in.
func TestSchedulerSkipsPausedRoom(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1000)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 50, OpensAt: later})
		users := f.join(t, 20)
		f.pause(t, true)
		var (
			mu  sync.Mutex
			got []string
		)
		rooms, err := New(tp.Client(t), Config{
			Prefix: f.prefix, Keys: testKeys, Instance: "a", TickInterval: 20 * time.Millisecond, Known: f.known,
			OnAdmit: func(_ string, as []Admission) {
				mu.Lock()
				defer mu.Unlock()
				for _, a := range as {
					got = append(got, a.Pass.User)
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		s := NewScheduler(rooms)
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(ctx) })
		admitted := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(got)
		}
		f.startAdmission(t)
		from := s.Stats().Rounds
		wait.For(t, 10*time.Second, "5 rounds while paused", func() bool { return s.Stats().Rounds >= from+5 })
		if n := admitted(); n != 0 {
			t.Fatalf("%d users let in while paused", n)
		}
		if c, err := f.rooms.Counts(ctx, f.id); err != nil || c.Admitted != 0 {
			t.Fatalf("counts while paused %+v, %v; want nobody admitted", c, err)
		}
		f.pause(t, false)
		wait.For(t, 10*time.Second, "5 users let in after the resume", func() bool { return admitted() >= 5 })
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(got, users[:len(got)]) {
			t.Fatalf("admitted %v, want users in order of place", got)
		}
	})
}
