package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/redis/rueidis"
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

// Acknowledged entries are trimmed, unfinished ones never. Trimming goes by
// whole stream nodes (XTRIM MINID ~), so the node holding the unfinished
// entry stays whole.
func TestTrimKeepsUnfinished(t *testing.T) {
	e := setup(t, redistest.Topologies(t)[1])
	ids := e.add(t, 250)
	stuck := ids[150]
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
	wait.For(t, 5*time.Second, "trimmed", func() bool {
		return handled.Load() == 250 && e.pending(t) == 1 && e.xlen(t, e.stream) < 250
	})
	rest, err := e.c.Do(context.Background(), e.c.B().Xrange().Key(e.stream).Start(stuck).End("+").Build()).AsXRange()
	if err != nil || len(rest) != 100 || rest[0].ID != stuck {
		t.Fatalf("from the pending entry on: %d entries (%v), want the 100 from %s", len(rest), err, stuck)
	}
}

// One trim removes at most its LIMIT of entries, never an unfinished one;
// trims called again until one trims nothing remove every finished node.
func TestTrimIsSliced(t *testing.T) {
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, tp)
			ids := e.add(t, 3000)
			ctx := context.Background()
			read, err := e.c.Do(ctx, e.c.B().Xreadgroup().Group(e.group, "c").Count(3000).
				Streams().Key(e.stream).Id(">").Build()).AsXRead()
			if err != nil || len(read[e.stream]) != 3000 {
				t.Fatalf("read %d entries: %v", len(read[e.stream]), err)
			}
			stuck := ids[2500]
			acked := slices.Delete(slices.Clone(ids), 2500, 2501)
			for _, part := range chunks(acked, 500) {
				if err := e.c.Do(ctx, e.c.B().Xack().Key(e.stream).Group(e.group).Id(part...).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			total, calls := int64(0), 0
			for {
				n, err := trimScript.Exec(ctx, e.c, []string{e.stream}, []string{"300"}).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				if n > 300 {
					t.Fatalf("one trim removed %d entries, over its limit of 300", n)
				}
				if n == 0 {
					break
				}
				total += n
				if calls++; calls > 100 {
					t.Fatal("trims never stopped")
				}
			}
			if calls < 2 || total < 2000 || total > 2500 {
				t.Fatalf("%d trims removed %d entries; want several, removing most of the 2,500 before the pending one", calls, total)
			}
			if n := e.xlen(t, e.stream); n != 3000-total {
				t.Fatalf("stream holds %d entries after trimming %d of 3000", n, total)
			}
			rest, err := e.c.Do(ctx, e.c.B().Xrange().Key(e.stream).Start(stuck).End("+").Build()).AsXRange()
			if err != nil || len(rest) != 500 || rest[0].ID != stuck {
				t.Fatalf("from the pending entry on: %d entries (%v), want the 500 from %s", len(rest), err, stuck)
			}
		})
	}
}

// addAt appends n entries with ids at unix ms at (at-0, at-1, ...) and
// returns their ids.
func (e env) addAt(t *testing.T, at int64, n int) []string {
	t.Helper()
	cmds := make(rueidis.Commands, n)
	for i := range n {
		cmds[i] = e.c.B().Xadd().Key(e.stream).Id(fmt.Sprintf("%d-%d", at, i)).FieldValue().
			FieldValue("message", strconv.Itoa(i)).Build()
	}
	ids := make([]string, n)
	for i, r := range e.c.DoMulti(context.Background(), cmds...) {
		id, err := r.ToString()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// holdAsGhost has consumer "ghost" read every new entry and, for those of
// ids, pretend it got them idle ago (XCLAIM IDLE, which counts no delivery).
func (e env) holdAsGhost(t *testing.T, idle time.Duration, ids []string) {
	t.Helper()
	ctx := context.Background()
	if err := e.c.Do(ctx, e.c.B().Xreadgroup().Group(e.group, "ghost").Count(100000).
		Streams().Key(e.stream).Id(">").Build()).Error(); err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	for _, part := range chunks(ids, 100) {
		if err := e.c.Do(ctx, e.c.B().Xclaim().Key(e.stream).Group(e.group).Consumer("ghost").MinIdleTime("0").
			Id(part...).Idle(idle.Milliseconds()).Justid().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
}

// pendingOf returns the ids pending for consumer.
func (e env) pendingOf(t *testing.T, consumer string) []string {
	t.Helper()
	rows, err := e.c.Do(context.Background(), e.c.B().Xpending().Key(e.stream).Group(e.group).Start("-").End("+").
		Count(100000).Consumer(consumer).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		row, _ := r.AsStrSlice()
		ids[i] = row[0]
	}
	return ids
}

// A reclaim slice looks only at pending entries added long enough ago to
// be idle, and its cursor walks them a slice at a time, each slice cut at
// its count of entries looked at or at its count of entries taken: every
// old entry is looked at once, the idle ones are taken, and entries added
// recently are never looked at, even when Redis counts them idle.
func TestReclaimLooksOnlyAtOldEntries(t *testing.T) {
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, tp)
			old := e.addAt(t, time.Now().Add(-time.Hour).UnixMilli(), 35)
			young := e.add(t, 20)
			// Every entry looks idle for an hour; only the old ones can be.
			// Two old ones were delivered again just now.
			e.holdAsGhost(t, time.Hour, append(slices.Clone(old), young...))
			busy := []string{old[5], old[6]}
			e.holdAsGhost(t, 0, busy)
			cfg := fastConfig(ReadPoll)
			cfg.ReclaimMinIdle = 30 * time.Second
			cfg.HandlerTimeout = 10 * time.Second
			p, err := NewPool(e.c, "i1", Spec{Stream: e.stream, Group: e.group,
				Handler: HandlerFunc(func(context.Context, []Message) []error { return nil })}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			const count, take = 10, 4
			scanned := 0
			var got []string
			cursor := reclaimStart
			for done := false; !done; {
				s, err := p.reclaimSlice(context.Background(), "i1-consumer-0", cursor, count, take)
				if err != nil {
					t.Fatal(err)
				}
				if s.scanned > count || len(s.msgs) > take {
					t.Fatalf("a slice looked at %d entries and took %d", s.scanned, len(s.msgs))
				}
				scanned += s.scanned
				for _, m := range s.msgs {
					got = append(got, m.ID)
					if m.Deliveries != 2 || m.Fields["message"] == "" {
						t.Errorf("entry %s taken over with %d deliveries, fields %v", m.ID, m.Deliveries, m.Fields)
					}
				}
				cursor, done = advance(s.last, s.scanned, count, len(s.msgs), take)
				if scanned > 100 {
					t.Fatal("the scan never ended")
				}
			}
			want := slices.DeleteFunc(slices.Clone(old), func(id string) bool { return slices.Contains(busy, id) })
			if !slices.Equal(got, want) {
				t.Fatalf("taken over %v, want the idle old entries %v", got, want)
			}
			if scanned != len(old) {
				t.Fatalf("the scan looked at %d entries, want the %d old ones, each once", scanned, len(old))
			}
			left := e.pendingOf(t, "ghost")
			if !slices.Equal(left, append(slices.Clone(busy), young...)) {
				t.Fatalf("ghost still holds %v, want the busy and the young entries", left)
			}
			// The scan that found nothing more starts over and takes nothing:
			// what it took is no longer idle.
			s, err := p.reclaimSlice(context.Background(), "i1-consumer-0", reclaimStart, count, take)
			if err != nil || len(s.msgs) != 0 || s.scanned != count {
				t.Fatalf("a new scan looked at %d and took %d (%v); want %d and 0", s.scanned, len(s.msgs), err, count)
			}
		})
	}
}

// A pool takes over the entries a dead consumer left idle, however many
// (several slices), with their delivery counts, at its first pass and
// without waiting: the entries are old and idle. Entries the dead consumer
// got recently stay its own.
func TestReclaimTakesOverOldIdleEntries(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		old := e.addAt(t, time.Now().Add(-time.Hour).UnixMilli(), 250)
		young := e.add(t, 5)
		e.holdAsGhost(t, time.Hour, old)
		cfg := fastConfig(mode)
		cfg.ReclaimMinIdle = 30 * time.Second
		cfg.HandlerTimeout = 10 * time.Second
		rec := newRecorder()
		e.start(t, "i1", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			rec.see(ctx, msgs)
			return nil
		})}, cfg)
		wait.For(t, 10*time.Second, "reclaimed", func() bool { return rec.count() == 250 && e.pending(t) == 5 })
		if left := e.pendingOf(t, "ghost"); !slices.Equal(left, young) {
			t.Fatalf("ghost holds %v, want the young entries %v", left, young)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, id := range old {
			if d := rec.deliveries[id]; len(d) != 1 || d[0] != 2 {
				t.Fatalf("entry %s deliveries seen %v, want [2]", id, d)
			}
		}
	})
}

// An idle entry deleted from the stream while pending is dead-lettered by
// the reclaim pass and leaves the pending list; the others are handled.
func TestReclaimDeadLettersDeletedEntries(t *testing.T) {
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, tp)
			old := e.addAt(t, time.Now().Add(-time.Hour).UnixMilli(), 3)
			e.holdAsGhost(t, time.Hour, old)
			if err := e.c.Do(context.Background(), e.c.B().Xdel().Key(e.stream).Id(old[1]).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			cfg := fastConfig(ReadPoll)
			cfg.ReclaimMinIdle = 30 * time.Second
			cfg.HandlerTimeout = 10 * time.Second
			rec := newRecorder()
			e.start(t, "i1", Spec{OnDeadLetter: rec.onDeadLetter, Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
				rec.see(ctx, msgs)
				return nil
			})}, cfg)
			wait.For(t, 10*time.Second, "settled", func() bool { return rec.count() == 2 && e.pending(t) == 0 })
			dl := rec.deadLetters()
			if d, ok := dl[old[1]]; !ok || d.Reason != reasonDeleted || len(dl) != 1 {
				t.Fatalf("dead letters %v, want only %s, %q", dl, old[1], reasonDeleted)
			}
			if rec.calls(old[1]) != 0 {
				t.Fatal("the handler got the deleted entry")
			}
		})
	}
}

// A batch bigger than one read's slice is read in several XREADGROUPs and
// handed to the handler whole, and every entry of it is acknowledged.
func TestBigBatchesReadAndAckedInSlices(t *testing.T) {
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, tp)
			e.add(t, 600)
			cfg := fastConfig(ReadBlock)
			cfg.BatchSize = 250
			var mu sync.Mutex
			var sizes []int
			rec := newRecorder()
			e.start(t, "i1", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
				mu.Lock()
				sizes = append(sizes, len(msgs))
				mu.Unlock()
				rec.see(ctx, msgs)
				return nil
			})}, cfg)
			wait.For(t, 10*time.Second, "handled and acknowledged", func() bool { return rec.count() == 600 && e.pending(t) == 0 })
			mu.Lock()
			defer mu.Unlock()
			if len(sizes) < 3 || sizes[0] != 250 || sizes[1] != 250 {
				t.Fatalf("batches %v, want 250, 250, then the rest", sizes)
			}
		})
	}
}
