package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/redistest"
	"github.com/dibsio/dibs/internal/wait"
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
