package stream

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// Distribution: 100 entries over 4 consumers — every consumer gets some, no
// entry twice, all acknowledged.
func TestDistribution(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		e.add(t, 100)
		cfg := fastConfig(mode)
		cfg.MinConsumers, cfg.MaxConsumers = 4, 4
		cfg.BatchSize = 10 // 100 entries make ten batches, enough for every consumer
		rec := newRecorder()
		var mu sync.Mutex
		seen := map[string]bool{}
		allSeen := make(chan struct{})
		h := HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			rec.see(ctx, msgs)
			mu.Lock()
			seen[ConsumerFromContext(ctx)] = true
			if len(seen) == 4 {
				select {
				case <-allSeen:
				default:
					close(allSeen)
				}
			}
			mu.Unlock()
			// Hold the batch until every consumer has had one (or give up), so
			// the test shows the others read while one is busy.
			select {
			case <-allSeen:
			case <-time.After(3 * time.Second):
			}
			return nil
		})
		e.start(t, "i1", Spec{Handler: h}, cfg)
		wait.For(t, 10*time.Second, "100 entries", func() bool { return rec.count() == 100 })
		wait.For(t, 5*time.Second, "nothing pending", func() bool { return e.pending(t) == 0 })
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for id, n := range rec.byID {
			if n != 1 {
				t.Errorf("entry %s handled %d times", id, n)
			}
		}
		if len(rec.byConsumer) != 4 {
			t.Errorf("consumers that got entries: %v, want 4", rec.byConsumer)
		}
	})
}

// Manual acknowledgement: entries are pending while the handler runs and
// acknowledged only after it succeeded.
func TestManualAck(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		e := setup(t, tp)
		e.add(t, 5)
		entered := make(chan struct{})
		release := make(chan struct{})
		var once sync.Once
		h := HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			once.Do(func() { close(entered) })
			<-release
			return nil
		})
		e.start(t, "i1", Spec{Handler: h}, fastConfig(mode))
		<-entered
		if got := e.pending(t); got != 5 {
			t.Fatalf("pending while handling = %d, want 5", got)
		}
		close(release)
		wait.For(t, 5*time.Second, "acks", func() bool { return e.pending(t) == 0 })
	})
}

// Blocking reads are capped across a registry's pools: with one slot and
// three idle pools, only one XREADGROUP BLOCK is in flight at a time, and the
// others fall back to sleeping.
func TestBlockingConnsCapped(t *testing.T) {
	tp := redistest.Topologies(t)[0]
	c := tp.Client(t)
	cfg := fastConfig(ReadBlock)
	cfg.MaxBlockingConns = 1
	r := newRegistry(t, c, "i1", cfg)
	var handled atomic.Int32 // entry ids repeat across streams: count them
	var envs []env
	for i := range 3 {
		e := setup(t, tp)
		envs = append(envs, e)
		if _, err := r.Run(context.Background(), strconv.Itoa(i), e.spec(HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			handled.Add(int32(len(msgs)))
			return nil
		}))); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, 5*time.Second, "the slot is in use", func() bool { return len(r.blocking) == 1 })
	for _, e := range envs {
		e.add(t, 2)
	}
	wait.For(t, 5*time.Second, "all pools handle work", func() bool { return handled.Load() == 6 })
	if n := len(r.blocking); n > 1 {
		t.Fatalf("blocking slots in use = %d", n)
	}
}
