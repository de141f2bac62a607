package waitroom

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// startWatcher starts a Watcher of rooms, stopped when the test ends.
func startWatcher(t *testing.T, rooms *Rooms, cfg WatcherConfig) *Watcher {
	t.Helper()
	w := NewWatcher(rooms, cfg)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stop watcher: %v", err)
		}
	})
	return w
}

// watch watches user in f's room, closed when the test ends.
func (f fixture) watch(t *testing.T, w *Watcher, user string) *Watch {
	t.Helper()
	s, err := w.Watch(f.id, user)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// next waits for the next standing of s.
func next(t *testing.T, s *Watch, what string) Standing {
	t.Helper()
	select {
	case st := <-s.Updates():
		return st
	case <-time.After(10 * time.Second):
		t.Fatalf("no standing of %s (%s)", s.user, what)
		return Standing{}
	}
}

// nextUntil reads standings of s until ok accepts one.
func nextUntil(t *testing.T, s *Watch, what string, ok func(Standing) bool) Standing {
	t.Helper()
	for {
		if st := next(t, s, what); ok(st) {
			return st
		}
	}
}

// drain discards a standing s holds.
func drain(s *Watch) {
	select {
	case <-s.Updates():
	default:
	}
}

// subscribed waits until n instances subscribe to the hints of f's room.
func (f fixture) subscribed(t *testing.T, n int64) {
	t.Helper()
	ch := f.rooms.Keys(f.id).Events()
	wait.For(t, 5*time.Second, "subscription to "+ch, func() bool {
		vals, err := f.c.Do(context.Background(), f.c.B().PubsubShardnumsub().Channel(ch).Build()).ToArray()
		if err != nil || len(vals) != 2 {
			return false
		}
		got, _ := vals[1].AsInt64()
		return got >= n
	})
}

// TestWatchAdmittedBeforeTickReturns: the scheduler's tick that lets a user
// in hands the user's watch the admitted standing, with a token that
// spends, before the tick returns; users still waiting get nothing from it.
func TestWatchAdmittedBeforeTickReturns(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1)
		var w *Watcher
		rooms, err := New(f.c, Config{Prefix: f.prefix, Keys: testKeys, OnAdmit: func(id string, a []Admission) { w.Admit(id, a) }})
		if err != nil {
			t.Fatal(err)
		}
		f.rooms = rooms
		w = startWatcher(t, rooms, WatcherConfig{Refresh: time.Hour})
		f.open(t, Settings{OpensAt: later})
		users := f.join(t, 2)
		s1, s2 := f.watch(t, w, users[0]), f.watch(t, w, users[1])
		tab := f.watch(t, w, users[0]) // a second tab of the same user
		f.startAdmission(t)
		sched := NewScheduler(rooms)
		ctx := context.Background()
		wait.For(t, 5*time.Second, "a tick that admits", func() bool {
			sched.tickRoom(ctx, f.id)
			if c, err := rooms.Counts(ctx, f.id); err != nil || c.Admitted == 0 {
				drain(s1) // standings re-read on the hints of ticks that let nobody in
				return false
			}
			// No waiting: the pushed standing is there when the tick returns.
			for _, s := range []*Watch{s1, tab} {
				select {
				case st := <-s.Updates():
					if st.Status != StatusAdmitted || st.Token == "" || st.Pass.User != users[0] {
						t.Fatalf("pushed standing: %+v", st)
					}
				default:
					t.Fatal("no admitted standing when the tick returned")
				}
			}
			return true
		})
		select {
		case st := <-s2.Updates():
			if st.Status != StatusWaiting {
				t.Fatalf("u2: %+v", st)
			}
		default:
		}
		if got := w.Watches(); got != 3 {
			t.Fatalf("%d watches, want 3", got)
		}
	})
}

// TestWatchHintFromAnotherInstance: a tick on one instance reaches the
// watches of another through the room's sharded pub/sub hint, with no
// fallback re-read in reach.
func TestWatchHintFromAnotherInstance(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1) // one unit: u1 is let in, u2 moves up and waits
		f.open(t, Settings{OpensAt: later})
		users := f.join(t, 3)
		other, err := New(tp.Client(t), Config{Prefix: f.prefix, Keys: testKeys})
		if err != nil {
			t.Fatal(err)
		}
		w := startWatcher(t, other, WatcherConfig{Refresh: time.Hour})
		s1, s2 := f.watch(t, w, users[0]), f.watch(t, w, users[1])
		f.subscribed(t, 1)
		f.startAdmission(t)
		sched := NewScheduler(f.rooms) // ticks on this instance, no OnAdmit
		wait.For(t, 5*time.Second, "admission", func() bool {
			sched.tickRoom(context.Background(), f.id)
			c, err := f.rooms.Counts(context.Background(), f.id)
			return err == nil && c.Admitted == 1
		})
		st := nextUntil(t, s1, "hint", func(st Standing) bool { return st.Status != StatusWaiting })
		if st.Status != StatusAdmitted || st.Token == "" {
			t.Fatalf("u1 after the hint: %+v", st)
		}
		st = nextUntil(t, s2, "hint", func(st Standing) bool { return st.Position < 2 })
		if st.Status != StatusWaiting || st.Position != 1 || st.StockExpectedToLast {
			t.Fatalf("u2 after the hint: %+v", st)
		}
	})
}

// TestWatchFallbackAndCheckIn: without any hint the standings are re-read
// on the fallback period, and a watched user keeps the place however long
// the wait, since the re-reads check in at a third of abandon_after.
func TestWatchFallbackAndCheckIn(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 5)
		abandon := 300 * time.Millisecond
		f.open(t, Settings{OpensAt: later, AbandonAfter: abandon})
		users := f.join(t, 2)
		w := startWatcher(t, f.rooms, WatcherConfig{Refresh: time.Hour})
		s := f.watch(t, w, users[1])
		seen := func() int64 { return f.seenOf(t, users[1]) }
		first := seen()
		// u2 keeps checking in past several abandonment times; u1 does not.
		wait.For(t, 10*time.Second, "check-ins past 3 × abandon_after", func() bool {
			return seen() > first+3*abandon.Milliseconds()
		})
		f.startAdmission(t)
		res, _ := f.admitUntil(t, 1)
		if res.Skipped != 1 {
			t.Fatalf("tick: %+v; want u1 skipped as abandoned, u2 admitted", res)
		}
		st := nextUntil(t, s, "fallback re-read", func(st Standing) bool { return st.Status != StatusWaiting })
		if st.Status != StatusAdmitted || st.Token == "" {
			t.Fatalf("u2: %+v", st)
		}
	})
}

// TestWatchLifecycle: a watch before Start or after Stop is refused, Stop
// is safe twice, and closing watches after Stop does not block.
func TestWatchLifecycle(t *testing.T) {
	t.Parallel()
	f := setup(t, redistest.Topologies(t)[0], 1)
	w := NewWatcher(f.rooms, WatcherConfig{})
	if _, err := w.Watch("p", "u1"); err != ErrWatcherClosed {
		t.Fatalf("watch before start: %v", err)
	}
	w.Admit("p", []Admission{{}}) // before start: nothing, no block
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(ctx) })
	if err := w.Start(ctx); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start = %v, want ErrStarted", err)
	}
	var open []*Watch
	for i := range 3 {
		s, err := w.Watch("p"+strconv.Itoa(i%2), "u1")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, s)
	}
	open[0].Close()
	open[0].Close()
	wait.For(t, 5*time.Second, "2 watches", func() bool { return w.Watches() == 2 })
	for range 2 {
		if err := w.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range open {
		s.Close()
	}
	if _, err := w.Watch("p", "u1"); err != ErrWatcherClosed {
		t.Fatalf("watch after stop: %v", err)
	}
	w.Admit("p", []Admission{{}})
	if err := w.Start(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop = %v, want ErrStopped", err)
	}
	for _, s := range open {
		<-s.Done()
	}
	var nilWatcher *Watcher
	nilWatcher.Admit("p", []Admission{{}})
}

// TestWatcherStopBeforeStart: a Watcher stopped before Start is done for
// good: Start fails with ErrStopped, watches are refused and Admit does
// nothing, without blocking.
func TestWatcherStopBeforeStart(t *testing.T) {
	t.Parallel()
	f := setup(t, redistest.Topologies(t)[0], 1)
	w := NewWatcher(f.rooms, WatcherConfig{})
	ctx := context.Background()
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("Start after Stop = %v, want ErrStopped", err)
	}
	if _, err := w.Watch("p", "u1"); err != ErrWatcherClosed {
		t.Fatalf("watch after stop: %v", err)
	}
	w.Admit("p", []Admission{{}})
}

func TestRefreshEvery(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ refresh, abandon, want time.Duration }{
		{2 * time.Second, 0, 2 * time.Second},
		{2 * time.Second, 120 * time.Second, 2 * time.Second},
		{2 * time.Second, 3 * time.Second, time.Second},
		{2 * time.Second, time.Millisecond, time.Millisecond},
	} {
		if got := refreshEvery(c.refresh, c.abandon); got != c.want {
			t.Errorf("refreshEvery(%s, %s) = %s, want %s", c.refresh, c.abandon, got, c.want)
		}
	}
}

// TestDeliverLatestWins: a watch holds the newest standing only, and
// nothing after a final one.
func TestDeliverLatestWins(t *testing.T) {
	t.Parallel()
	s := &Watch{c: make(chan Standing, 1)}
	ws := []*Watch{s}
	deliver(ws, Standing{Status: StatusWaiting, Position: 3})
	deliver(ws, Standing{Status: StatusWaiting, Position: 2})
	if st := <-s.c; st.Position != 2 {
		t.Fatalf("got %+v, want position 2", st)
	}
	deliver(ws, Standing{Status: StatusAdmitted, Token: "t"})
	deliver(ws, Standing{Status: StatusWaiting, Position: 1}) // a stale re-read
	if st := <-s.c; st.Status != StatusAdmitted {
		t.Fatalf("got %+v, want admitted", st)
	}
	select {
	case st := <-s.c:
		t.Fatalf("got %+v after a final standing", st)
	default:
	}
}
