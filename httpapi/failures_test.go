package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFailureLogCollapsesRuns: the first failure of a run is logged at
// once, the next ones within FailureLogEvery are left out and counted in
// the next line, and the success that ends the run returns its length
// once, after which a failure is logged at once again. The clock is the
// test's.
func TestFailureLogCollapsesRuns(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	f := &failureLog{now: func() time.Time { return now }}
	type step struct {
		advance    time.Duration
		ok         bool  // a success instead of a failure
		logged     bool  // a failure: logged
		n          int64 // a failure: failures in the run; a success: the run it ends
		suppressed int64 // a logged failure: left out since the line before
	}
	steps := []step{
		{ok: true, n: 0}, // nothing failed: nothing to say
		{logged: true, n: 1},
		{advance: time.Second, n: 2},
		{advance: time.Second, n: 3},
		{advance: FailureLogEvery - 2*time.Second - 1, n: 4},
		{advance: 1, logged: true, n: 5, suppressed: 3},
		{advance: FailureLogEvery, logged: true, n: 6, suppressed: 0},
		{n: 7},
		{ok: true, n: 7},
		{ok: true, n: 0},     // said once
		{logged: true, n: 1}, // a new run: logged at once
		{n: 2},
		{advance: 3 * FailureLogEvery, logged: true, n: 3, suppressed: 1},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if s.ok {
			if n := f.ok(); n != s.n {
				t.Fatalf("step %d: the success ended a run of %d, want %d", i, n, s.n)
			}
			continue
		}
		n, suppressed, logged := f.fail()
		if n != s.n || logged != s.logged || suppressed != s.suppressed {
			t.Fatalf("step %d: fail() = %d, %d, %v; want %d, %d, %v", i, n, suppressed, logged, s.n, s.suppressed, s.logged)
		}
	}
}

// TestFailureLogConcurrent: failures from many goroutines at once, the
// clock moving under them, are each either logged or counted as left out
// in a later line, and one success then returns them all.
func TestFailureLogConcurrent(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	f := &failureLog{now: func() time.Time { return time.Unix(0, clock.Add(int64(time.Millisecond))) }}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		lines []int64 // per line logged: the failures it covers
		last  int64   // the highest failure logged
	)
	const goroutines, each = 8, 2000
	for range goroutines {
		wg.Go(func() {
			for range each {
				if n, suppressed, log := f.fail(); log {
					mu.Lock()
					lines = append(lines, 1+suppressed)
					last = max(last, n)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	total := int64(goroutines * each)
	// The lines cover every failure up to the last of them; those after it
	// wait for the next line.
	covered := int64(0)
	for _, c := range lines {
		covered += c
	}
	if covered != last {
		t.Errorf("%d lines cover %d failures, the last line was failure %d", len(lines), covered, last)
	}
	if len(lines) == 0 || int64(len(lines)) >= total/100 {
		t.Errorf("%d lines for %d failures over %v: not collapsed", len(lines), total, time.Duration(clock.Load()))
	}
	if n := f.ok(); n != total {
		t.Errorf("the success ended a run of %d, want %d", n, total)
	}
}

// TestClaimFailuresLogOnce: claims whose Redis calls fail in a row log one
// ERROR line per FailureLogEvery, the next one counting those left out;
// the first claim Redis answers logs once that Redis is reachable again;
// a client's own cancellation logs nothing. The clock is the test's.
func TestClaimFailuresLogOnce(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	s := &failureLogs{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))}
	s.redis.now = func() time.Time { return now }
	claim := httptest.NewRequest(http.MethodPost, "/v1/promotions/p/claims", nil)
	down := errors.New("claim p for u: connection refused")
	for range 5 {
		if pr := s.unexpected(claim, down); pr.Code != CodeUnavailable || pr.Status != http.StatusServiceUnavailable {
			t.Fatalf("problem %s %d", pr.Code, pr.Status)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.unexpected(claim.WithContext(ctx), fmt.Errorf("claim p for u: %w", context.Canceled))
	now = now.Add(FailureLogEvery)
	s.unexpected(claim, down)
	s.redisAnswered()
	s.redisAnswered()
	want := `level=ERROR msg="request failed" method=POST path=/v1/promotions/p/claims err="claim p for u: connection refused" suppressed=0 failures=1
level=ERROR msg="request failed" method=POST path=/v1/promotions/p/claims err="claim p for u: connection refused" suppressed=4 failures=6
level=INFO msg="redis reachable again" failures=6
`
	if got := buf.String(); got != want {
		t.Errorf("the log:\n%s\nwant:\n%s", got, want)
	}
}
