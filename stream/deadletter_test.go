package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// streamNodeMaxEntries is the server's stream-node-max-entries: how far past
// MAXLEN ~ N a stream may grow, since Redis trims whole nodes.
func (e env) streamNodeMaxEntries(t *testing.T) int64 {
	t.Helper()
	kv, err := e.c.Do(context.Background(), e.c.B().ConfigGet().Parameter("stream-node-max-entries").Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(kv["stream-node-max-entries"], 10, 64)
	if err != nil {
		t.Fatalf("stream-node-max-entries %q: %v", kv["stream-node-max-entries"], err)
	}
	return n
}

// The dead-letter stream keeps about DeadLetterMaxLen of the newest dead
// letters; -1 keeps them all.
func TestDeadLetterStreamBounded(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		for _, tc := range []struct {
			maxLen  int64
			entries int
		}{{maxLen: 10, entries: 250}, {maxLen: -1, entries: 120}} {
			t.Run(fmt.Sprintf("max len %d", tc.maxLen), func(t *testing.T) {
				e := setup(t, tp)
				// Entries without a "message" field are malformed.
				ids := e.add(t, tc.entries, "bad", "1")
				cfg := fastConfig(mode)
				cfg.DeadLetterMaxLen = tc.maxLen
				var dead atomic.Int64
				cfg.Hooks.DeadLetter = func(string, string) { dead.Add(1) }
				handler := PerMessage(func(_ context.Context, m Message) error {
					return Malformed(errors.New("missing field message"))
				})
				e.start(t, "i1", Spec{Handler: handler}, cfg)
				wait.For(t, 20*time.Second, "every entry dead-lettered", func() bool {
					return dead.Load() == int64(tc.entries) && e.pending(t) == 0
				})
				dl := e.dlq(t)
				if last := dl[len(dl)-1].FieldValues[DeadLetterFieldID]; last != ids[len(ids)-1] {
					t.Fatalf("newest dead letter is %s, want %s", last, ids[len(ids)-1])
				}
				n := int64(len(dl))
				if tc.maxLen < 0 {
					if n != int64(tc.entries) {
						t.Fatalf("unbounded dead-letter stream holds %d entries, want %d", n, tc.entries)
					}
					return
				}
				if bound := tc.maxLen + e.streamNodeMaxEntries(t); n < tc.maxLen || n > bound || n >= int64(tc.entries) {
					t.Fatalf("dead-letter stream holds %d of %d dead letters, want %d..%d", n, tc.entries, tc.maxLen, bound)
				}
			})
		}
	})
}

// The dead-letter callback runs under a deadline of HandlerTimeout: one that
// blocks until its context is done (a stalled database) gives up there, its
// entry stays pending, and the consumer goes on with other entries.
func TestDeadLetterCallbackDeadline(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		bad := e.add(t, 1, "bad", "1")[0]
		cfg := fastConfig(mode)
		cfg.HandlerTimeout = 200 * time.Millisecond
		type call struct {
			deadline time.Duration // from the call to the context's deadline; -1 without one
			err      error         // what the callback returned
		}
		calls := make(chan call, 16)
		onDL := func(ctx context.Context, d DeadLetter) error {
			c := call{deadline: -1}
			if dl, ok := ctx.Deadline(); ok {
				c.deadline = time.Until(dl)
			}
			<-ctx.Done()
			c.err = ctx.Err()
			calls <- c
			return c.err
		}
		var good atomic.Int64
		h := PerMessage(func(_ context.Context, m Message) error {
			if m.Fields["bad"] != "" {
				return Permanent(errors.New("promotion deleted"))
			}
			good.Add(1)
			return nil
		})
		e.start(t, "i1", Spec{Handler: h, OnDeadLetter: onDL}, cfg)
		var c call
		select {
		case c = <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("the dead-letter callback is still blocked")
		}
		if c.deadline < 0 || c.deadline > cfg.HandlerTimeout {
			t.Fatalf("callback deadline in %s, want within HandlerTimeout (%s)", c.deadline, cfg.HandlerTimeout)
		}
		if !errors.Is(c.err, context.DeadlineExceeded) {
			t.Fatalf("callback context ended with %v, want its deadline", c.err)
		}
		e.add(t, 3)
		wait.For(t, 10*time.Second, "the good entries handled", func() bool { return good.Load() == 3 })
		if n := len(e.dlq(t)); n != 0 {
			t.Fatalf("dead letters = %d, want 0 (the callback failed)", n)
		}
		wait.For(t, 5*time.Second, "only the bad entry pending", func() bool { return e.pending(t) == 1 })
		if n := e.redisDeliveries(t, bad); n < 1 {
			t.Fatalf("bad entry deliveries = %d", n)
		}
	})
}

// requireMessage is a handler that reports entries without a "message"
// field as malformed.
func requireMessage(rec *recorder) Handler {
	return PerMessage(func(ctx context.Context, m Message) error {
		if _, ok := m.Fields["message"]; !ok {
			return Malformed(errors.New("missing field message"))
		}
		rec.see(ctx, []Message{m})
		return nil
	})
}

// A malformed entry: a malformed entry is dead-lettered at once with
// its reason (not silently acknowledged); the good ones are handled.
func TestMalformedDeadLettered(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		e.add(t, 3)
		bad, err := e.c.Do(context.Background(), e.c.B().Xadd().Key(e.stream).Id("*").FieldValue().
			FieldValue("invalid-key", "invalid-value").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		e.start(t, "i1", Spec{Handler: requireMessage(rec), OnDeadLetter: rec.onDeadLetter}, fastConfig(mode))
		wait.For(t, 5*time.Second, "dead letter", func() bool { return len(e.dlq(t)) == 1 })
		wait.For(t, 5*time.Second, "nothing pending", func() bool { return e.pending(t) == 0 })
		d := e.dlq(t)[0].FieldValues
		if d[DeadLetterFieldID] != bad || !strings.HasPrefix(d[DeadLetterFieldReason], "malformed: missing field message") ||
			d[DeadLetterFieldDeliveries] != "1" || d["invalid-key"] != "invalid-value" {
			t.Fatalf("dead letter entry = %v", d)
		}
		if dl, ok := rec.deadLetters()[bad]; !ok || dl.Deliveries != 1 {
			t.Fatalf("dead-letter callback = %+v (%v)", dl, ok)
		}
		if rec.count() != 3 {
			t.Fatalf("handled %d good entries, want 3", rec.count())
		}
	})
}

// An entry that keeps failing is dead-lettered after MaxDeliveries, with the
// reason and the count.
func TestMaxDeliveries(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		ids := e.add(t, 1)
		cfg := quickReclaimConfig(mode)
		cfg.MaxDeliveries = 3
		rec := newRecorder()
		h := HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			rec.see(ctx, msgs)
			return []error{errors.New("database says no")}
		})
		e.start(t, "i1", Spec{Handler: h, OnDeadLetter: rec.onDeadLetter}, cfg)
		wait.For(t, 10*time.Second, "dead letter", func() bool { return len(e.dlq(t)) == 1 })
		wait.For(t, 5*time.Second, "nothing pending", func() bool { return e.pending(t) == 0 })
		d := e.dlq(t)[0].FieldValues
		if d[DeadLetterFieldDeliveries] != "3" || !strings.Contains(d[DeadLetterFieldReason], "max deliveries (3) reached: database says no") {
			t.Fatalf("dead letter = %v", d)
		}
		if n := rec.calls(ids[0]); n != 3 {
			t.Fatalf("handler calls = %d, want 3", n)
		}
		rec.mu.Lock()
		got := rec.deliveries[ids[0]]
		rec.mu.Unlock()
		if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
			t.Fatalf("deliveries seen %v, want [1 2 3]", got)
		}
	})
}

// TestDeadLetterResolved: an OnDeadLetter callback that finds the work done
// acknowledges the entry itself and returns ErrResolved; no dead letter is
// written and nothing stays pending.
func TestDeadLetterResolved(t *testing.T) {
	t.Parallel()
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		var called atomic.Int32
		spec := Spec{
			Handler: PerMessage(func(context.Context, Message) error {
				return Permanent(errors.New("refused"))
			}),
			OnDeadLetter: func(ctx context.Context, d DeadLetter) error {
				called.Add(1)
				if err := e.c.Do(ctx, e.c.B().Xack().Key(e.stream).Group(e.group).Id(d.ID).Build()).Error(); err != nil {
					return err
				}
				return ErrResolved
			},
		}
		e.start(t, "r1", spec, fastConfig(mode))
		e.add(t, 3)
		wait.For(t, 10*time.Second, "the callbacks", func() bool { return called.Load() == 3 && e.pending(t) == 0 })
		if n := len(e.dlq(t)); n != 0 {
			t.Fatalf("%d dead letters written for resolved entries", n)
		}
	})
}
