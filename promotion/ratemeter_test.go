package promotion

import (
	"sync"
	"testing"
	"time"
)

// The rate meter starts at the first sample, moves towards new samples by
// rateWeight, ignores empty or instant batches, and loses no update when
// issuers report at once.
func TestRateMeter(t *testing.T) {
	t.Parallel()
	var r rateMeter
	if got := r.rate(); got != 0 {
		t.Fatalf("rate before any sample = %g", got)
	}
	r.observe(0, time.Second)
	r.observe(10, 0)
	if got := r.rate(); got != 0 {
		t.Fatalf("empty samples counted: %g", got)
	}
	r.observe(100, time.Second) // 100/s
	if got := r.rate(); got != 100 {
		t.Fatalf("first sample = %g, want 100", got)
	}
	r.observe(200, 100*time.Millisecond) // 2,000/s
	if got, want := r.rate(), 0.8*100+0.2*2000; got != want {
		t.Fatalf("after a second sample = %g, want %g", got, want)
	}

	// Concurrent samples of one rate converge on it, whatever the order.
	var c rateMeter
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				c.observe(50, 100*time.Millisecond) // 500/s
			}
		})
	}
	wg.Wait()
	if got := c.rate(); got < 499.999 || got > 500.001 {
		t.Fatalf("concurrent samples of 500/s = %g", got)
	}
}
