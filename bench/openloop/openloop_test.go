package openloop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// The tests run Run inside a synctest bubble: its clock is a fake one that
// moves only when every goroutine of the bubble waits, so the times below
// are exact and assert nothing about the machine's speed.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestScheduleDue(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Schedule{Start: start, Rate: 4}
	for i, want := range []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second} {
		if got := s.Due(int64(i)).Sub(start); got != want {
			t.Errorf("Due(%d) = start+%v, want start+%v", i, got, want)
		}
	}
	// A high rate keeps its precision far into the schedule.
	s = Schedule{Start: start, Rate: 80000}
	if got, want := s.Due(8_000_000).Sub(start), 100*time.Second; got != want {
		t.Errorf("Due(8e6) at 80,000/s = start+%v, want start+%v", got, want)
	}
}

func TestLatencyFromDue(t *testing.T) {
	due := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := Latency(due, due.Add(3*time.Millisecond)); got != 3*time.Millisecond {
		t.Errorf("Latency = %v, want 3ms", got)
	}
	if got := Latency(due, due.Add(-time.Millisecond)); got != 0 {
		t.Errorf("Latency of a completion before its due time = %v, want 0", got)
	}
}

// sendTimes records when each request reached its worker, by index.
type sendTimes struct {
	mu    sync.Mutex
	start time.Time
	at    map[int64]time.Duration
}

func (s *sendTimes) note(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at[r.Index] = time.Since(s.start)
}

// TestRunOnSchedule: a pool that keeps up sends every request when it is
// due, so each latency is the request's own service time.
func TestRunOnSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sent := &sendTimes{start: time.Now(), at: map[int64]time.Duration{}}
		res, err := Run(t.Context(), Config{Rate: 1000, N: 50, Workers: 4}, func(ctx context.Context, r Request) error {
			sent.note(r)
			time.Sleep(2 * time.Millisecond)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != 50 || res.Failed != 0 || res.Unsent != 0 || res.Late != 0 {
			t.Fatalf("completed %d, failed %d, unsent %d, late %d; want 50, 0, 0, 0", res.Completed, res.Failed, res.Unsent, res.Late)
		}
		if lo, hi := res.Latency.Min(), res.Latency.Max(); lo != 2000 || hi != 2000 {
			t.Errorf("latency %d..%d µs, want 2000 for every request", lo, hi)
		}
		for i := range int64(50) {
			if want := time.Duration(i) * time.Millisecond; sent.at[i] != want {
				t.Fatalf("request %d sent at +%v, want +%v", i, sent.at[i], want)
			}
		}
		if want := 51 * time.Millisecond; res.Elapsed != want {
			t.Errorf("Elapsed = %v, want %v", res.Elapsed, want)
		}
	})
}

// TestRunExhaustedPoolCountsFromDue: one worker, requests due every 1 ms,
// each taking 10 ms. Request i is sent when request i-1 completes, at
// 10i ms, and completes at 10(i+1) ms: its latency from its due time (i ms)
// is 9i+10 ms. A pacer that started its clock when it sent the request
// would report 10 ms for every one of them.
func TestRunExhaustedPoolCountsFromDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		res, err := Run(t.Context(), Config{Rate: 1000, N: n, Workers: 1}, func(ctx context.Context, r Request) error {
			time.Sleep(10 * time.Millisecond)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != n {
			t.Fatalf("completed %d, want %d", res.Completed, n)
		}
		// Every request's latency, in order (the histogram keeps three
		// significant digits: compare by its equivalence).
		var got []int64
		for _, bar := range res.Latency.Distribution() {
			for range bar.Count {
				got = append(got, bar.From)
			}
		}
		if len(got) != n {
			t.Fatalf("%d latencies recorded, want %d", len(got), n)
		}
		for i, v := range got {
			if want := int64((9*i + 10) * 1000); !res.Latency.ValuesAreEquivalent(v, want) {
				t.Errorf("latency %d is %d µs, want %d µs", i, v, want)
			}
		}
		// Request 0 went out on time; requests 1..9 waited for the worker.
		if res.Late != n-1 {
			t.Errorf("late %d, want %d", res.Late, n-1)
		}
		if want := 100 * time.Millisecond; res.Elapsed != want {
			t.Errorf("Elapsed = %v, want %v", res.Elapsed, want)
		}
	})
}

// TestRunStopsWithContext: requests not handed out when the context ends
// are counted as unsent, and Run returns once the ones in flight end.
func TestRunStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 95*time.Millisecond)
		defer cancel()
		res, err := Run(ctx, Config{Rate: 100, N: 100, Workers: 2}, func(ctx context.Context, r Request) error {
			time.Sleep(time.Millisecond)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Due at 0, 10, ..., 90 ms: ten were sent before the context ended.
		if res.Completed != 10 || res.Unsent != 90 {
			t.Errorf("completed %d, unsent %d; want 10, 90", res.Completed, res.Unsent)
		}
	})
}

// TestRunFailures: a failed request is counted and its latency left out;
// the first error is kept.
func TestRunFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		res, err := Run(t.Context(), Config{Rate: 1000, N: 10, Workers: 2}, func(ctx context.Context, r Request) error {
			if r.Index%5 == 4 {
				return boom
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != 8 || res.Failed != 2 || res.Latency.TotalCount() != 8 || !errors.Is(res.Err, boom) {
			t.Errorf("completed %d, failed %d, recorded %d, err %v; want 8, 2, 8, boom", res.Completed, res.Failed, res.Latency.TotalCount(), res.Err)
		}
	})
}

func TestRunRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Rate: 0, N: 1, Workers: 1}, {Rate: 1, N: 0, Workers: 1}, {Rate: 1, N: 1, Workers: 0}} {
		if _, err := Run(t.Context(), cfg, func(context.Context, Request) error { return nil }); err == nil {
			t.Errorf("Run(%+v) = nil error", cfg)
		}
	}
}
