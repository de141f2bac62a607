package waitroom

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// TestSchedulerOnTick: the scheduler hands each tick of a room whose lease
// it holds to OnTick, with the room's totals and the line's length as
// Counts reads them and the users it let in; an instance that does not
// hold the lease hands nothing.
func TestSchedulerOnTick(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1000)
		ctx := context.Background()
		f.open(t, Settings{AdmitPerSecond: 20, OpensAt: later})
		f.join(t, 10)
		var mu sync.Mutex
		ticks := map[string][]TickResult{} // instance → the ticks it handed over
		last := func(name string) (TickResult, int) {
			mu.Lock()
			defer mu.Unlock()
			n := len(ticks[name])
			if n == 0 {
				return TickResult{}, 0
			}
			return ticks[name][n-1], n
		}
		start := func(name string) *Scheduler {
			rooms, err := New(tp.Client(t), Config{
				Prefix: f.prefix, Keys: testKeys, Instance: name, Known: f.known,
				TickInterval: 50 * time.Millisecond, LeaseTTL: 2 * time.Second,
				OnTick: func(id string, res TickResult) {
					if id != f.id {
						t.Errorf("tick of %q", id)
					}
					mu.Lock()
					defer mu.Unlock()
					ticks[name] = append(ticks[name], res)
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
		a := start("a")
		wait.For(t, 10*time.Second, "a's first tick", func() bool { _, n := last("a"); return n > 0 })
		b := start("b")
		f.startAdmission(t)
		wait.For(t, 10*time.Second, "a's ticks to let everyone in", func() bool {
			res, _ := last("a")
			return res.Admitted == 10
		})
		if err := b.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		c, err := f.rooms.Counts(ctx, f.id)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := last("a")
		if res.State != "open" || res.Admitted != c.Admitted || res.Skipped != c.Abandoned || res.Joined != c.Joined ||
			res.Waiting != c.Waiting {
			t.Fatalf("last tick %+v, the room's counts %+v", res, c)
		}
		mu.Lock()
		defer mu.Unlock()
		var prev, handed int64
		for _, r := range ticks["a"] {
			if r.Admitted < prev {
				t.Fatalf("admitted fell from %d to %d", prev, r.Admitted)
			}
			prev, handed = r.Admitted, handed+int64(len(r.New))
		}
		if handed != 10 {
			t.Fatalf("the ticks handed %d users over, want 10", handed)
		}
		if len(ticks["b"]) != 0 {
			t.Fatalf("b, without the lease, handed %d ticks over", len(ticks["b"]))
		}
	})
}
