package stream

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// testBatchWait is the batch wait of these tests: no other timer of a pool
// on fastConfig has this duration, so the test clock tells when a consumer
// waits for its batch to fill.
const testBatchWait = 7 * time.Millisecond

// batchCase is a single-consumer pool on a test clock with a batch wait,
// whose handler reports the size of every batch it gets.
type batchCase struct {
	e       env
	clk     *testClock
	p       *Pool
	rec     *recorder
	batches chan int

	mu    sync.Mutex
	reads []int // entries returned by each read of new entries (Hooks.Read), empty ones left out
}

func startBatchCase(t *testing.T, tp redistest.Topology, mode ReadMode, batchSize int, prefill int) *batchCase {
	t.Helper()
	bc := &batchCase{e: setup(t, tp), clk: newTestClock(), rec: newRecorder(), batches: make(chan int, 100)}
	if prefill > 0 {
		bc.e.add(t, prefill)
	}
	cfg := fastConfig(mode)
	cfg.Clock = bc.clk
	cfg.BatchSize = batchSize
	cfg.BatchWait = testBatchWait
	cfg.Hooks.Read = func(_ string, n int) {
		if n > 0 {
			bc.mu.Lock()
			bc.reads = append(bc.reads, n)
			bc.mu.Unlock()
		}
	}
	bc.p = bc.e.start(t, "i1", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
		bc.rec.see(ctx, msgs)
		bc.batches <- len(msgs)
		return nil
	})}, cfg)
	return bc
}

// waiting waits until the consumer waits for its batch to fill.
func (bc *batchCase) waiting(t *testing.T) {
	t.Helper()
	wait.For(t, 5*time.Second, "the batch wait", func() bool { return bc.clk.waiting(testBatchWait) })
}

// partial adds n entries, fewer than a batch, and waits until the consumer
// read them and waits for its batch to fill. (Wake cuts short the poller's
// sleep on the test clock in poll mode.)
func (bc *batchCase) partial(t *testing.T, n int) {
	t.Helper()
	bc.e.add(t, n)
	bc.p.Wake()
	bc.waiting(t)
}

// endWait lets the batch wait pass.
func (bc *batchCase) endWait() {
	bc.clk.Jump(testBatchWait)
	bc.clk.Fire()
}

// noBatch fails if the handler got a batch.
func (bc *batchCase) noBatch(t *testing.T, when string) {
	t.Helper()
	select {
	case n := <-bc.batches:
		t.Fatalf("the handler got a batch of %d %s", n, when)
	default:
	}
}

// wantBatch fails unless the handler's next batch has want entries.
func (bc *batchCase) wantBatch(t *testing.T, want int, what string) {
	t.Helper()
	select {
	case n := <-bc.batches:
		if n != want {
			t.Fatalf("%s = %d entries, want %d", what, n, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no batch reached the handler", what)
	}
}

// drained waits until every entry is acknowledged.
func (bc *batchCase) drained(t *testing.T) {
	t.Helper()
	wait.For(t, 5*time.Second, "nothing pending", func() bool { return bc.e.pending(t) == 0 })
}

func (bc *batchCase) readSizes() []int {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	return append([]int(nil), bc.reads...)
}

// The entries that arrive while a consumer waits after a partial read reach
// the handler in one batch with those of the read, and are acknowledged.
func TestBatchWaitMergesEntries(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		bc := startBatchCase(t, tp, mode, 10, 0)
		bc.partial(t, 1)
		bc.e.add(t, 3)
		bc.noBatch(t, "before the wait passed")
		bc.endWait()
		bc.wantBatch(t, 4, "the batch of both reads")
		if got := bc.readSizes(); len(got) != 2 || got[0] != 1 || got[1] != 3 {
			t.Fatalf("reads = %v, want [1 3]", got)
		}
		bc.drained(t)
	})
}

// A second read fetches only what a batch has room for: the rest stays in
// the stream for the next read, which finds a full batch and hands it on at
// once.
func TestBatchWaitTakesOnlyABatch(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		bc := startBatchCase(t, tp, mode, 5, 0)
		bc.partial(t, 2)
		bc.e.add(t, 8)
		bc.endWait()
		bc.wantBatch(t, 5, "the merged batch")
		bc.wantBatch(t, 5, "the next batch, of the entries left, at once")
		bc.drained(t)
		if n := bc.rec.count(); n != 10 {
			t.Fatalf("handled %d entries, want 10", n)
		}
	})
}

// A read that fills a batch is handled at once, without a wait; the partial
// read after it waits.
func TestBatchWaitSkipsFullReads(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		bc := startBatchCase(t, tp, mode, 5, 7)
		// The test clock has not moved yet: a wait would hold the batch.
		bc.wantBatch(t, 5, "the full first read")
		bc.waiting(t)
		bc.noBatch(t, "while the partial read waits")
		bc.e.add(t, 1)
		bc.endWait()
		bc.wantBatch(t, 3, "the partial read with the entry added during its wait")
		bc.drained(t)
	})
}

// Stop ends a batch wait at once: Stop returns although the test clock never
// lets the wait pass, the entries already read are handled and
// acknowledged, and those that arrived during the wait stay in the stream
// for the next pool. Nothing is lost, nothing handled twice.
func TestBatchWaitStop(t *testing.T) {
	eachCase(t, func(t *testing.T, tp redistest.Topology, mode ReadMode) {
		bc := startBatchCase(t, tp, mode, 10, 0)
		bc.partial(t, 2)
		bc.e.add(t, 3)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := bc.p.Stop(ctx); err != nil {
			t.Fatalf("Stop during a batch wait: %v", err)
		}
		<-bc.p.Done()
		// A blocking read may return after the first of the two entries.
		got := bc.readSizes()
		if len(got) != 1 {
			t.Fatalf("reads = %v, want only the first: the stop skips the second", got)
		}
		bc.wantBatch(t, got[0], "the batch handled at the stop")
		if n := bc.e.pending(t); n != 0 {
			t.Fatalf("pending after the stop = %d, want 0", n)
		}

		cfg := fastConfig(mode)
		cfg.BatchWait = 0
		bc.e.start(t, "i2", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
			bc.rec.see(ctx, msgs)
			return nil
		})}, cfg)
		wait.For(t, 5*time.Second, "the entries added during the wait", func() bool { return bc.rec.count() == 5 })
		bc.drained(t)
		bc.rec.mu.Lock()
		defer bc.rec.mu.Unlock()
		for id, n := range bc.rec.byID {
			if n != 1 {
				t.Errorf("entry %s handled %d times", id, n)
			}
		}
	})
}
