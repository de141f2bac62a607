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

// outage is a handler for one entry whose database is down until up is set:
// it fails transiently until then, and succeeds after.
type outage struct {
	up        atomic.Bool
	calls     atomic.Int64 // handler calls
	successes atomic.Int64 // handler calls that succeeded
}

func (o *outage) handler() Handler {
	return PerMessage(func(context.Context, Message) error {
		o.calls.Add(1)
		if !o.up.Load() {
			return Transient(errors.New("database unreachable"))
		}
		o.successes.Add(1)
		return nil
	})
}

// redeliverDuringOutage runs rounds pools one after the other, the pool of
// round r named instance(r); each runs until the handler was called once
// more, then stops with the entry still pending. It fails the test as soon
// as anything was dead-lettered.
func redeliverDuringOutage(t *testing.T, e env, o *outage, rec *recorder, cfg Config, rounds int, instance func(int) string) {
	t.Helper()
	for r := range rounds {
		before := o.calls.Load()
		p := e.start(t, instance(r), Spec{Handler: o.handler(), OnDeadLetter: rec.onDeadLetter}, cfg)
		wait.For(t, 10*time.Second, fmt.Sprintf("a delivery or a dead letter in round %d", r), func() bool {
			return o.calls.Load() > before || len(e.dlq(t)) > 0 || len(rec.deadLetters()) > 0
		})
		stopPool(t, p)
		if n := len(e.dlq(t)); n > 0 || len(rec.deadLetters()) > 0 {
			t.Fatalf("round %d of the outage: %d dead letters (%v), want none", r, n, rec.deadLetters())
		}
	}
}

// redisDeliveries is Redis's delivery count of the pending entry id.
func (e env) redisDeliveries(t *testing.T, id string) int64 {
	t.Helper()
	rows, err := e.c.Do(context.Background(), e.c.B().Xpending().Key(e.stream).Group(e.group).
		Start(id).End(id).Count(1).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("entry %s is not pending", id)
	}
	row, err := rows[0].ToArray()
	if err != nil {
		t.Fatal(err)
	}
	n, err := row[3].AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// recoverFromOutage brings the database back, runs one more pool and checks
// that the entry was handled once and nothing was dead-lettered.
func recoverFromOutage(t *testing.T, e env, o *outage, rec *recorder, cfg Config, instance string) {
	t.Helper()
	o.up.Store(true)
	e.start(t, instance, Spec{Handler: o.handler(), OnDeadLetter: rec.onDeadLetter}, cfg)
	wait.For(t, 10*time.Second, "the entry handled", func() bool { return o.successes.Load() == 1 && e.pending(t) == 0 })
	if n := len(e.dlq(t)); n > 0 || len(rec.deadLetters()) > 0 {
		t.Fatalf("%d dead letters (%v), want none", n, rec.deadLetters())
	}
	if n := o.successes.Load(); n != 1 {
		t.Fatalf("handled %d times, want once", n)
	}
}

// A database outage (the handler fails transiently) while the entry is
// redelivered far more often than MaxDeliveries — reclaimed by one process
// after another (XAUTOCLAIM), or drained from its own pending list
// (XREADGROUP 0) by a process restarted again and again — dead-letters
// nothing, and the entry is handled once the database is back.
func TestOutageNeverDeadLetters(t *testing.T) {
	cases := []struct {
		name     string
		instance func(round int) string
		last     string // the instance that runs once the database is back
	}{
		{"reclaimed by other processes", func(r int) string { return fmt.Sprintf("reclaimer%d", r) }, "recovered"},
		{"restarted process drains its own", func(int) string { return "restarted" }, "restarted"},
	}
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				e := setup(t, tp)
				ids := e.add(t, 1)
				cfg := quickReclaimConfig(mode)
				cfg.MaxDeliveries = 2
				o, rec := &outage{}, newRecorder()
				redeliverDuringOutage(t, e, o, rec, cfg, 7, tc.instance)
				if n := e.redisDeliveries(t, ids[0]); n <= 2*cfg.MaxDeliveries {
					t.Fatalf("Redis delivered the entry %d times; the test wants far more than MaxDeliveries (%d)", n, cfg.MaxDeliveries)
				}
				recoverFromOutage(t, e, o, rec, cfg, tc.last)
			})
		}
	})
}
