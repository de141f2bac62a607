package waitroom

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// testLoop is a loop over n rooms whose ticks each take cost, recording
// how many run at once.
type testLoop struct {
	*loop
	mu               sync.Mutex
	ticks            map[string]int
	running, maxBusy int
	rounds           atomic.Int64 // list calls
}

func newTestLoop(n, workers int, interval, cost time.Duration) *testLoop {
	tl := &testLoop{ticks: map[string]int{}}
	rooms := make([]string, n)
	for i := range rooms {
		rooms[i] = "r" + strconv.Itoa(i)
	}
	tl.loop = &loop{
		interval: interval,
		workers:  workers,
		list: func(context.Context) ([]string, error) {
			tl.rounds.Add(1)
			return rooms, nil
		},
		work: func(ctx context.Context, room string) {
			tl.mu.Lock()
			tl.ticks[room]++
			tl.running++
			tl.maxBusy = max(tl.maxBusy, tl.running)
			tl.mu.Unlock()
			select {
			case <-time.After(cost):
			case <-ctx.Done():
			}
			tl.mu.Lock()
			tl.running--
			tl.mu.Unlock()
		},
	}
	return tl
}

// runFor runs the loop for d of fake time, then stops it and waits.
func (tl *testLoop) runFor(d time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tl.run(ctx) }()
	time.Sleep(d)
	synctest.Wait()
	cancel()
	<-done
}

func TestLoopTicksEveryRoomEachInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tl := newTestLoop(6, 4, time.Second, 10*time.Millisecond)
		tl.runFor(10*time.Second + 500*time.Millisecond)
		st := tl.stats()
		if st.Rounds != 10 || st.Overruns != 0 {
			t.Fatalf("10 s at 1 s ticks: %+v", st)
		}
		for room, n := range tl.ticks {
			if n != 10 {
				t.Errorf("%s ticked %d times, want 10", room, n)
			}
		}
		// 6 rooms, 4 busy workers: the round runs the fifth itself each
		// time, and never more than the workers and the round run at once.
		if st.CallerRuns < 10 || tl.maxBusy != 5 {
			t.Errorf("caller runs %d, most ticks at once %d; want at least 10 and 5", st.CallerRuns, tl.maxBusy)
		}
	})
}

func TestLoopOverrunNeverPilesUp(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// One room whose tick takes 2.5 intervals: a round ends every 3
		// ticks, and the two ticks in between are skipped, not queued.
		tl := newTestLoop(1, 2, time.Second, 2500*time.Millisecond)
		tl.runFor(9*time.Second + 600*time.Millisecond)
		st := tl.stats()
		if st.Rounds != 3 || st.Overruns != 6 || tl.maxBusy != 1 {
			t.Fatalf("9 s of 2.5 s rounds at 1 s ticks: %+v, at most %d at once; want 3 rounds, 6 overruns, 1", st, tl.maxBusy)
		}
		if tl.rounds.Load() != 3 {
			t.Fatalf("%d rounds listed the rooms, want 3", tl.rounds.Load())
		}
	})
}

func TestLoopBackPressure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// 9 rooms, 2 workers, each tick 400 ms: the round runs the rooms
		// the pool cannot take, so it lasts past the interval and the
		// next tick is skipped; never more than workers + 1 run at once.
		tl := newTestLoop(9, 2, time.Second, 400*time.Millisecond)
		tl.runFor(4*time.Second + time.Millisecond)
		st := tl.stats()
		if tl.maxBusy != 3 {
			t.Fatalf("at most %d ticks at once, want 3", tl.maxBusy)
		}
		if st.CallerRuns == 0 || st.Overruns == 0 {
			t.Fatalf("no back-pressure: %+v", st)
		}
	})
}

func TestSchedulerStartStop(t *testing.T) {
	t.Parallel()
	rooms, err := New(redistest.Client(t), Config{Prefix: redistest.Prefix(t), Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Run("stop before start", func(t *testing.T) {
		s := NewScheduler(rooms)
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); !errors.Is(err, ErrStopped) {
			t.Fatalf("Start after Stop = %v, want ErrStopped", err)
		}
	})
	t.Run("stop twice", func(t *testing.T) {
		s := NewScheduler(rooms)
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); !errors.Is(err, ErrStarted) {
			t.Fatalf("second Start = %v, want ErrStarted", err)
		}
		for range 2 {
			if err := s.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Start(ctx); !errors.Is(err, ErrStopped) {
			t.Fatalf("Start after Stop = %v, want ErrStopped", err)
		}
	})
	t.Run("stop deadline", func(t *testing.T) {
		s := NewScheduler(rooms)
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		dead, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Stop(dead); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSchedulerAdmitsAndHandsOver(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1000)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 20, OpensAt: later})
		users := f.join(t, 100)
		var mu sync.Mutex
		by := map[string][]string{} // instance → users it admitted
		start := func(name string) *Scheduler {
			rooms, err := New(tp.Client(t), Config{
				Prefix: f.prefix, Keys: testKeys, Instance: name, Known: f.known,
				TickInterval: 50 * time.Millisecond, LeaseTTL: 200 * time.Millisecond,
				OnAdmit: func(id string, as []Admission) {
					mu.Lock()
					defer mu.Unlock()
					for _, a := range as {
						by[name] = append(by[name], a.Pass.User)
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
			return s
		}
		admitted := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(by["a"]) + len(by["b"])
		}
		a := start("a")
		f.startAdmission(t)
		wait.For(t, 10*time.Second, "a to admit 5", func() bool { return admitted() >= 5 })
		b := start("b")
		wait.For(t, 10*time.Second, "10 admitted", func() bool { return admitted() >= 10 })
		mu.Lock()
		if len(by["b"]) != 0 {
			t.Errorf("b admitted %v while a held the lease", by["b"])
		}
		mu.Unlock()
		if err := a.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		n := admitted()
		wait.For(t, 10*time.Second, "b to take over", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(by["b"]) >= 3
		})
		_ = b.Stop(ctx)
		mu.Lock()
		defer mu.Unlock()
		all := append(slices.Clone(by["a"]), by["b"]...)
		if len(all) < n || !slices.Equal(all, users[:len(all)]) {
			t.Fatalf("admitted %v, want users in order of place", all)
		}
	})
}
