package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// StatusClientClosedRequest is the status the request metrics and the
// access log give a request whose client left before the answer went out
// (nginx's 499, "client closed request"). No client ever reads it: it is
// not a problem's status, and a request counted with it is no 5xx.
const StatusClientClosedRequest = 499

// FailureLogEvery is the most often the log says that requests met the
// same kind of unexpected failure: the first failure is logged at once,
// the ones after it within this time are counted, and the next line says
// how many were left out.
const FailureLogEvery = 10 * time.Second

// clientLeft says whether r's client hung up: net/http cancels a request's
// context when its connection closes (or an HTTP/2 stream is reset). A
// request's own deadlines end its context with DeadlineExceeded instead.
// (net/http also cancels a request still running past its read deadline,
// Config.ReadTimeout, the same way; every deadline of the handlers is
// shorter by default.)
func clientLeft(r *http.Request) bool {
	return errors.Is(context.Cause(r.Context()), context.Canceled)
}

// failureLogs are the Server's one problem mapper (fail and problemFor in
// problem.go) and its logs of unexpected errors: one for the claims' Redis
// calls, which a claim Redis answered ends with a line "redis reachable
// again", one for every other request's (Redis or the database), which
// nothing ends. The Server and each of its parts embed the one the Server
// made, so every handler answers an error the same way and logs to the
// same logger.
type failureLogs struct {
	log   *slog.Logger // the Server's logger (see LogHandler)
	redis failureLog
	other failureLog
}

// unexpected is the problem of an error no sentinel names: Redis or the
// database did not answer as expected. It is logged, rate-limited
// (failureLog), unless it is the cancellation of a client that left, which
// is no failure of the server: the request counts as
// StatusClientClosedRequest (see observe).
func (s *failureLogs) unexpected(r *http.Request, err error) *Problem {
	claim := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/claims")
	detail := "Redis or the database did not answer; retry shortly"
	if claim {
		detail = "Redis did not answer; the claim may or may not have been taken: retry with the same Idempotency-Key"
	}
	pr := problem(CodeUnavailable, detail).retry(1)
	if errors.Is(err, context.Canceled) && clientLeft(r) {
		return pr // no failure of the server: observe counts it as 499
	}
	f := &s.other
	if claim {
		f = &s.redis
	}
	if n, suppressed, log := f.fail(); log {
		attrs := []any{"method", r.Method, "path", r.URL.Path, "err", err, "suppressed", suppressed}
		if claim {
			attrs = append(attrs, "failures", n)
		}
		s.log.ErrorContext(r.Context(), "request failed", attrs...)
	}
	return pr
}

// redisAnswered reports a claim that Redis answered, whatever the answer:
// after failures it logs, once, that Redis is reachable again.
func (s *failureLogs) redisAnswered() {
	if n := s.redis.ok(); n > 0 {
		s.log.Info("redis reachable again", "failures", n)
	}
}

// failureLog decides which of a run of failures are logged: the first at
// once, then at most one per FailureLogEvery, each with the count of the
// failures left out since the line before; and, where successes are
// reported, when the run ended.
//
// Request goroutines call it at once, so it holds no lock and no goroutine:
// its state is three atomics, written by whichever request fails or
// succeeds. A success, the claim path's common case, costs one atomic load
// of failures, which only failures write (0 while nothing fails), so it
// shares its cache line read-only. A failure adds to failures and logs
// only if it wins the compare-and-swap of next. The counts are exact while
// a run of failures and the success that ends it do not overlap; a failure
// that races that success may be counted in the run that ends or in the
// next.
type failureLog struct {
	// now is the clock; nil is time.Now. Set by tests only.
	now func() time.Time

	failures atomic.Int64 // failures since the last success (since the start if none is reported)
	logged   atomic.Int64 // the value of failures when the last line was logged
	next     atomic.Int64 // Unix nanoseconds before which no line is logged; 0: log the next failure
}

// fail counts a failure. log says whether to log it; n is the failures
// since the last success, suppressed those not logged since the line
// before.
func (f *failureLog) fail() (n, suppressed int64, log bool) {
	n = f.failures.Add(1)
	now := time.Now
	if f.now != nil {
		now = f.now
	}
	t := now().UnixNano()
	next := f.next.Load()
	if t < next || !f.next.CompareAndSwap(next, t+int64(FailureLogEvery)) {
		return n, 0, false
	}
	return n, max(n-f.logged.Swap(n)-1, 0), true
}

// ok counts a success. It returns the failures that the success ends, once
// (0 when none came before it), and lets the next failure be logged at once.
func (f *failureLog) ok() int64 {
	if f.failures.Load() == 0 {
		return 0
	}
	n := f.failures.Swap(0)
	if n == 0 {
		return 0 // another success took them
	}
	f.logged.Store(0)
	f.next.Store(0)
	return n
}
