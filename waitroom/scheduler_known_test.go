package waitroom

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// setEnd moves promotion id's end to at the way promotion.Manager.Patch
// does, reopening it if at is ahead.
func (f fixture) setEnd(t *testing.T, at time.Time) {
	t.Helper()
	ctx := context.Background()
	pt, _, err := f.gate.BeginPatch(ctx, f.id, claim.Change{EndsAt: &at, Reopen: true}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pt.Apply(ctx); err != nil {
		t.Fatal(err)
	}
}

// leaseHeld reports whether anyone holds the room's tick lease.
func (f fixture) leaseHeld(t *testing.T) bool {
	t.Helper()
	n, err := f.c.Do(context.Background(), f.c.B().Exists().Key(f.rooms.Keys(f.id).Lease()).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// knownList is a Config.Known a test changes as it goes.
type knownList struct{ p atomic.Pointer[[]Known] }

func (k *knownList) set(list ...Known) { k.p.Store(&list) }

func (k *knownList) get() []Known {
	if l := k.p.Load(); l != nil {
		return *l
	}
	return nil
}

// roomScheduler starts a scheduler of instance "a" over the fixture's
// prefix, ticking every 20ms the rooms known lists, and returns it with
// the users it let in so far.
func (f fixture) roomScheduler(t *testing.T, known *knownList) (*Scheduler, func() []string) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []string
	)
	rooms, err := New(f.tp.Client(t), Config{
		Prefix: f.prefix, Keys: testKeys, Instance: "a", TickInterval: 20 * time.Millisecond,
		LeaseTTL: time.Second, Known: known.get,
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
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// rounds waits for n more rounds of s.
func rounds(t *testing.T, s *Scheduler, n int64) {
	t.Helper()
	from := s.Stats().Rounds
	wait.For(t, 10*time.Second, "scheduler rounds", func() bool { return s.Stats().Rounds >= from+n })
}

// TestSchedulerTicksKnownRoomsOnly: the scheduler ticks the rooms the
// instance knows and no other, whatever Redis holds: a room nobody knows,
// or one not started by the instance's clock, is not touched (no lease is
// taken, nobody let in) even though the registry set names it.
func TestSchedulerTicksKnownRoomsOnly(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1000)
		f.open(t, Settings{AdmitPerSecond: 1000})
		f.join(t, 3)
		var known knownList
		s, admitted := f.roomScheduler(t, &known)
		rounds(t, s, 5)
		known.set(Known{ID: f.id, Starts: time.Now().Add(time.Hour)})
		rounds(t, s, 5)
		if f.leaseHeld(t) || len(admitted()) != 0 {
			t.Fatalf("a room not known, then not started, was ticked: lease %v, admitted %v", f.leaseHeld(t), admitted())
		}
		known.set(Known{ID: f.id, Starts: time.Now().Add(-time.Second)})
		wait.For(t, 10*time.Second, "3 users let in", func() bool { return len(admitted()) == 3 })
	})
}

// TestSchedulerReopenedRoom: a room whose promotion ended is left alone
// after the tick that saw it (the lease is given up and not taken again),
// and ticked again once its end moves later: the users who joined after
// the reopening are let in.
func TestSchedulerReopenedRoom(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1000)
		f.open(t, Settings{AdmitPerSecond: 1000})
		f.join(t, 2)
		var known knownList
		ends := time.Now().Add(time.Hour)
		known.set(Known{ID: f.id, Ends: ends})
		s, admitted := f.roomScheduler(t, &known)
		wait.For(t, 10*time.Second, "2 users let in", func() bool { return len(admitted()) == 2 })

		ended := time.Now().Add(-time.Minute)
		f.setEnd(t, ended)
		known.set(Known{ID: f.id, Ends: ended})
		wait.For(t, 10*time.Second, "the lease given up at the end", func() bool { return !f.leaseHeld(t) })
		rounds(t, s, 5)
		if f.leaseHeld(t) {
			t.Fatal("an ended room was ticked again")
		}

		f.setEnd(t, ends)
		known.set(Known{ID: f.id, Ends: ends})
		if _, err := f.rooms.Join(context.Background(), f.id, "late"); err != nil {
			t.Fatal(err)
		}
		wait.For(t, 10*time.Second, "the user who joined after the reopening let in", func() bool {
			return slices.Contains(admitted(), "late")
		})
	})
}

// TestSchedulerEndStillAhead: a room Redis found ended while the instance's
// definition says its end is still ahead (a reopening written to the
// database before Redis, or clocks apart) is ticked every round, so it
// admits as soon as Redis reopens it, with no change to what the instance
// knows.
func TestSchedulerEndStillAhead(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1000)
		f.open(t, Settings{AdmitPerSecond: 1000})
		f.setEnd(t, time.Now().Add(-time.Minute))
		if _, err := f.rooms.Join(context.Background(), f.id, "u1"); !errors.Is(err, ErrEnded) {
			t.Fatalf("join after the end: %v, want ErrEnded", err)
		}
		var known knownList
		ends := time.Now().Add(time.Hour)
		known.set(Known{ID: f.id, Ends: ends})
		s, admitted := f.roomScheduler(t, &known)
		rounds(t, s, 3)
		f.setEnd(t, ends)
		if _, err := f.rooms.Join(context.Background(), f.id, "u1"); err != nil {
			t.Fatal(err)
		}
		wait.For(t, 10*time.Second, "u1 let in", func() bool { return len(admitted()) == 1 })
	})
}

// TestRoomsOpenedIsTheDefault: without Config.Known, the scheduler ticks
// the rooms opened through its Rooms, until they are unregistered.
func TestRoomsOpenedIsTheDefault(t *testing.T) {
	t.Parallel()
	f := setup(t, redistest.Topologies(t)[0], 1000)
	if got := f.rooms.Opened(); len(got) != 0 {
		t.Fatalf("opened before any Open: %v", got)
	}
	f.open(t, Settings{AdmitPerSecond: 1000})
	f.open(t, Settings{AdmitPerSecond: 1000})
	if got := f.rooms.Opened(); len(got) != 1 || got[0].ID != f.id {
		t.Fatalf("opened: %v, want %s once", got, f.id)
	}
	if err := f.rooms.Unregister(context.Background(), f.id); err != nil {
		t.Fatal(err)
	}
	if got := f.rooms.Opened(); len(got) != 0 {
		t.Fatalf("opened after Unregister: %v", got)
	}
}
