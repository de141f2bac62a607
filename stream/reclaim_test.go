package stream

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/redistest"
	"github.com/dibsio/dibs/internal/wait"
)

// Entries a dead consumer holds are reclaimed by a live one, with their
// delivery count.
func TestReclaimFromDeadConsumer(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		ids := e.add(t, 5)
		// "ghost" reads the entries and dies without acknowledging them.
		if err := e.c.Do(context.Background(), e.c.B().Xreadgroup().Group(e.group, "ghost").Count(10).
			Streams().Key(e.stream).Id(">").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		cfg := fastConfig(mode)
		cfg.ReclaimMinIdle = 300 * time.Millisecond
		cfg.HandlerTimeout = 100 * time.Millisecond
		rec := newRecorder()
		e.start(t, "i1", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			rec.see(ctx, msgs)
			return nil
		})}, cfg)
		wait.For(t, 5*time.Second, "reclaim", func() bool { return rec.count() == 5 })
		wait.For(t, 5*time.Second, "nothing pending", func() bool { return e.pending(t) == 0 })
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, id := range ids {
			if d := rec.deliveries[id]; len(d) != 1 || d[0] != 2 {
				t.Errorf("entry %s deliveries seen %v, want [2]", id, d)
			}
		}
	})
}

// A slow handler within its deadline is not reclaimed by another process.
func TestSlowHandlerNotReclaimed(t *testing.T) {
	e := setup(t, redistest.Topologies(t)[0])
	cfg := fastConfig(ReadPoll)
	cfg.ReclaimMinIdle = 300 * time.Millisecond
	cfg.HandlerTimeout = 140 * time.Millisecond
	cfg.ReclaimInterval = 10 * time.Millisecond
	var calls atomic.Int32
	slow := PerMessage(func(ctx context.Context, m Message) error {
		calls.Add(1)
		<-ctx.Done() // runs until its deadline
		return nil
	})
	e.start(t, "a", Spec{Handler: slow}, cfg)
	e.start(t, "b", Spec{Handler: slow}, cfg)
	e.add(t, 1)
	wait.For(t, 5*time.Second, "handled", func() bool { return calls.Load() >= 1 && e.pending(t) == 0 })
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

// Acknowledged entries are trimmed, unfinished ones never.
func TestTrimKeepsUnfinished(t *testing.T) {
	e := setup(t, redistest.Topologies(t)[1])
	ids := e.add(t, 30)
	stuck := ids[10]
	cfg := fastConfig(ReadPoll)
	cfg.ReclaimMinIdle = time.Hour
	cfg.HandlerTimeout = time.Second
	cfg.ReclaimInterval = 10 * time.Millisecond
	handled := atomic.Int32{}
	e.start(t, "i1", Spec{Handler: PerMessage(func(_ context.Context, m Message) error {
		handled.Add(1)
		if m.ID == stuck {
			return errors.New("not yet")
		}
		return nil
	})}, cfg)
	wait.For(t, 5*time.Second, "trimmed", func() bool { return handled.Load() == 30 && e.xlen(t, e.stream) == 20 })
	first, err := e.c.Do(context.Background(), e.c.B().Xrange().Key(e.stream).Start("-").End("+").Count(1).Build()).AsXRange()
	if err != nil || len(first) != 1 || first[0].ID != stuck {
		t.Fatalf("first entry = %v, %v; want the pending %s", first, err, stuck)
	}
}
