package stream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// failuresLen is the number of failure counts kept for the test's stream.
func (e env) failuresLen(t *testing.T) int64 {
	t.Helper()
	n, err := e.c.Do(context.Background(), e.c.B().Hlen().Key(FailuresKey(e.stream, e.group)).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Errors of no kind still dead-letter, after exactly MaxDeliveries of them,
// counted across restarts, and whatever the outage and restarts before
// raised Redis's delivery count to.
func TestUnknownErrorsDeadLetterAfterMaxFailures(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		ids := e.add(t, 1)
		cfg := fastConfig(mode)
		cfg.MaxDeliveries = 3
		o, rec := &outage{}, newRecorder()
		redeliverDuringOutage(t, e, o, rec, cfg, 5, func(int) string { return "i1" })

		// The database answers now, but the entry makes the handler fail.
		var failures atomic.Int64
		seen := make(chan int64, 16) // Message.Failures of each call
		h := PerMessage(func(_ context.Context, m Message) error {
			seen <- m.Failures
			failures.Add(1)
			return errors.New("constraint violated")
		})
		for run := 0; run < 2*int(cfg.MaxDeliveries) && len(e.dlq(t)) == 0; run++ {
			before := failures.Load()
			p := e.start(t, "i1", Spec{Handler: h, OnDeadLetter: rec.onDeadLetter}, cfg)
			wait.For(t, 10*time.Second, "a failed call", func() bool { return failures.Load() > before })
			stopPool(t, p)
		}
		if n := failures.Load(); n != cfg.MaxDeliveries {
			t.Fatalf("%d failed calls before the dead letter, want exactly %d", n, cfg.MaxDeliveries)
		}
		close(seen)
		want := int64(0)
		for f := range seen {
			if f != want {
				t.Fatalf("call %d saw Failures %d", want+1, f)
			}
			want++
		}
		dl := e.dlq(t)
		if len(dl) != 1 {
			t.Fatalf("%d dead letters, want 1", len(dl))
		}
		redisDeliveries := fmt.Sprint(cfg.MaxDeliveries + 5) // the outage's deliveries, then the failures
		if f := dl[0].FieldValues; f[DeadLetterFieldID] != ids[0] || f[DeadLetterFieldDeliveries] != "3" ||
			f[DeadLetterFieldRedisDeliveries] != redisDeliveries {
			t.Fatalf("dead letter %v, want deliveries 3 and Redis deliveries %s", f, redisDeliveries)
		}
		d := rec.deadLetters()[ids[0]]
		if d.Deliveries != 3 || fmt.Sprint(d.Message.Deliveries) != redisDeliveries {
			t.Fatalf("dead-letter callback got Deliveries %d, Message.Deliveries %d", d.Deliveries, d.Message.Deliveries)
		}
		if e.pending(t) != 0 || e.failuresLen(t) != 0 {
			t.Fatalf("pending %d, failure counts %d after the dead letter; want 0, 0", e.pending(t), e.failuresLen(t))
		}
	})
}

// Failure counts do not outlive their entries: acknowledging (by the
// default XACK or by Spec.Ack) deletes them, and the reclaim pass deletes
// those of entries acknowledged elsewhere or never pending.
func TestFailureCountsAreRemoved(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		for _, customAck := range []bool{false, true} {
			t.Run(fmt.Sprintf("custom ack %v", customAck), func(t *testing.T) {
				e := setup(t, tp)
				ids := e.add(t, 3)
				ctx := context.Background()
				key := FailuresKey(e.stream, e.group)
				// A count left by an entry acknowledged long ago.
				if err := e.c.Do(ctx, e.c.B().Hset().Key(key).FieldValue().FieldValue("1-1", "2").Build()).Error(); err != nil {
					t.Fatal(err)
				}
				cfg := quickReclaimConfig(mode)
				cfg.MaxDeliveries = 100 // entry 1 is acknowledged by hand, never dead-lettered
				var calls [3]atomic.Int64
				// Entry 0 fails once, then succeeds; entry 1 always fails
				// and is acknowledged by hand below; entry 2 succeeds.
				h := PerMessage(func(_ context.Context, m Message) error {
					switch m.ID {
					case ids[0]:
						if calls[0].Add(1) == 1 {
							return errors.New("flaky")
						}
					case ids[1]:
						calls[1].Add(1)
						return errors.New("stuck")
					default:
						calls[2].Add(1)
					}
					return nil
				})
				spec := Spec{Handler: h}
				if customAck {
					spec.Ack = func(ctx context.Context, msgs []Message) error {
						for _, m := range msgs {
							if err := e.c.Do(ctx, e.c.B().Xack().Key(e.stream).Group(e.group).Id(m.ID).Build()).Error(); err != nil {
								return err
							}
						}
						return nil
					}
				}
				e.start(t, "i1", spec, cfg)
				wait.For(t, 10*time.Second, "entry 0 handled", func() bool { return calls[0].Load() == 2 })
				wait.For(t, 10*time.Second, "entry 1 failed twice", func() bool { return calls[1].Load() >= 2 })
				if err := e.c.Do(ctx, e.c.B().Xack().Key(e.stream).Group(e.group).Id(ids[1]).Build()).Error(); err != nil {
					t.Fatal(err)
				}
				wait.For(t, 10*time.Second, "no failure counts left", func() bool { return e.failuresLen(t) == 0 })
				if e.pending(t) != 0 || len(e.dlq(t)) != 0 {
					t.Fatalf("pending %d, dead letters %d; want 0, 0", e.pending(t), len(e.dlq(t)))
				}
			})
		}
	})
}

// An entry whose last counted failure could not be dead-lettered (the
// callback failed) is dead-lettered on its next delivery without another
// handler call.
func TestSpentEntryDeadLetteredWithoutHandler(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		ids := e.add(t, 1)
		cfg := quickReclaimConfig(mode)
		cfg.MaxDeliveries = 2
		var calls, callbacks atomic.Int64
		rec := newRecorder()
		h := PerMessage(func(context.Context, Message) error {
			calls.Add(1)
			return errors.New("constraint violated")
		})
		onDL := func(ctx context.Context, d DeadLetter) error {
			if callbacks.Add(1) == 1 {
				return errors.New("database unreachable")
			}
			return rec.onDeadLetter(ctx, d)
		}
		e.start(t, "i1", Spec{Handler: h, OnDeadLetter: onDL}, cfg)
		wait.For(t, 10*time.Second, "the dead letter", func() bool { return len(e.dlq(t)) == 1 && e.pending(t) == 0 })
		if n := calls.Load(); n != cfg.MaxDeliveries {
			t.Fatalf("handler calls = %d, want %d", n, cfg.MaxDeliveries)
		}
		if n := callbacks.Load(); n != 2 {
			t.Fatalf("dead-letter callbacks = %d, want 2", n)
		}
		if d := rec.deadLetters()[ids[0]]; d.Deliveries != 2 || d.Reason != "max deliveries (2) reached: 2 handler failures" {
			t.Fatalf("dead letter %+v", d)
		}
		if n := e.failuresLen(t); n != 0 {
			t.Fatalf("failure counts = %d, want 0", n)
		}
	})
}
