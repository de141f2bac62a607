package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
)

// TestClaimDeadlines: claims that start within an eighth of the timeout
// share one deadline, and every claim's deadline lies between 7/8 of the
// timeout and all of it after its start.
func TestClaimDeadlines(t *testing.T) {
	t.Parallel()
	const timeout = 8 * time.Second
	d := claimDeadlines{timeout: timeout}
	t0 := time.Now()
	first := d.at(t0)
	check := func(ctx context.Context, start time.Time) {
		t.Helper()
		at, ok := ctx.Deadline()
		if left := at.Sub(start); !ok || left <= timeout-timeout/8 || left > timeout {
			t.Fatalf("a claim at +%s has %s left (deadline %v), want more than %s and at most %s",
				start.Sub(t0), left, ok, timeout-timeout/8, timeout)
		}
	}
	check(first, t0)
	for _, after := range []time.Duration{0, time.Second / 2, timeout/8 - time.Nanosecond} {
		if ctx := d.at(t0.Add(after)); ctx != first {
			t.Fatalf("a claim %s after the first got a deadline of its own", after)
		}
		check(first, t0.Add(after))
	}
	later := t0.Add(timeout / 8)
	next := d.at(later)
	if next == first {
		t.Fatal("a claim an eighth of the timeout after the first shares its deadline")
	}
	check(next, later)
	if d.at(later.Add(time.Millisecond)) != next {
		t.Fatal("the next claim does not share the new deadline")
	}
}

// TestClaimContext: a claim's context carries its request's values (the
// request id) but not its cancellation, and ends at its deadline.
func TestClaimContext(t *testing.T) {
	t.Parallel()
	s := &Server{claimDeadlines: claimDeadlines{timeout: 50 * time.Millisecond}}
	parent, cancel := context.WithCancel(context.Background())
	aw := &answerWriter{ResponseWriter: httptest.NewRecorder()}
	r := withRequestID(aw, httptest.NewRequest("POST", "/v1/promotions/p/claims", nil).WithContext(parent))
	for name, w := range map[string]http.ResponseWriter{"in the answerWriter": aw, "allocated": httptest.NewRecorder()} {
		ctx := s.claimContext(w, r, time.Now())
		if got := RequestID(ctx); got != aw.ctx.id || got == "" {
			t.Errorf("%s: the claim's request id is %q, the request's %q", name, got, aw.ctx.id)
		}
		if _, ok := ctx.Deadline(); !ok {
			t.Errorf("%s: the claim's context has no deadline", name)
		}
	}
	ctx := s.claimContext(aw, r, time.Now())
	cancel()
	if ctx.Err() != nil {
		t.Fatalf("the claim ended with its request: %v", ctx.Err())
	}
	// A context made from the claim's ends with its deadline.
	child, stop := context.WithCancel(ctx)
	defer stop()
	wait.For(t, 10*time.Second, "the claim's deadline", func() bool { return child.Err() == context.DeadlineExceeded })
}

// TestRequestContext: the request's context answers RequestID, its parent's
// values, and ends with its parent.
func TestRequestContext(t *testing.T) {
	t.Parallel()
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	aw := &answerWriter{ResponseWriter: httptest.NewRecorder()}
	r := withRequestID(aw, httptest.NewRequest("GET", "/healthz", nil).WithContext(parent))
	ctx := r.Context()
	if RequestID(ctx) == "" || ctx.Value(key{}) != "v" {
		t.Fatalf("request id %q, parent's value %v", RequestID(ctx), ctx.Value(key{}))
	}
	if got := aw.Header().Get(RequestIDHeader); got != RequestID(ctx) {
		t.Fatalf("X-Request-Id %q, the context's %q", got, RequestID(ctx))
	}
	child, stop := context.WithCancel(ctx)
	defer stop()
	cancel()
	wait.For(t, 10*time.Second, "the request's end", func() bool { return child.Err() == context.Canceled })
	if RequestID(context.Background()) != "" {
		t.Fatal("a context outside a request has a request id")
	}
}

// TestNewRequestID: the ids the server makes are 26 characters of A-Z and
// 2-7, and differ.
func TestNewRequestID(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 10000 {
		id := newRequestID()
		if len(id) != 26 || strings.Trim(id, requestIDAlphabet) != "" {
			t.Fatalf("id %q", id)
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
	}
}
