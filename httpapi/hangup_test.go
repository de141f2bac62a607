package httpapi_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// logLines collects a logger's lines; safe for any goroutine.
type logLines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// observed is an instance whose API's metrics and log (Debug and up) the
// test reads.
type observed struct {
	*env
	m   *httpapi.Metrics
	log *logLines
}

func setupObserved(t *testing.T, b backend) observed {
	t.Helper()
	return observe(func(tune func(*httpapi.Config)) *env { return setupWith(t, b, tune) })
}

// observe is setupObserved with the instance made by mk, which applies
// tune to the API's Config.
func observe(mk func(tune func(*httpapi.Config)) *env) observed {
	o := observed{log: &logLines{}}
	reg := prometheus.NewRegistry()
	o.m = httpapi.NewMetrics(reg)
	o.env = mk(func(c *httpapi.Config) {
		c.Metrics, c.Gatherer = o.m, reg
		c.Logger = slog.New(slog.NewTextHandler(o.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	return o
}

// gone serves a request whose client hung up right after sending it: its
// context ends before the server reads it, as net/http ends it when the
// connection closes. headers are name, value pairs.
func (o observed) gone(t *testing.T, method, path, body string, headers ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	cancel()
	o.api.ServeHTTP(httptest.NewRecorder(), req)
}

// requests is the count of route's requests answered with code.
func (o observed) requests(route string, code int) float64 {
	return value(o.m.Requests.WithLabelValues(route, strconv.Itoa(code)))
}

// claims is the count of claims answered with outcome.
func (o observed) claims(outcome string) float64 {
	return value(o.m.Claims.WithLabelValues(outcome))
}

// value is counter c's value.
func value(c prometheus.Counter) float64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		panic(err)
	}
	return d.GetCounter().GetValue()
}

// noErrors fails the test if the log has a line at ERROR.
func (o observed) noErrors(t *testing.T) {
	t.Helper()
	for line := range strings.Lines(o.log.String()) {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("logged at ERROR: %s", line)
		}
	}
}

// eachObserved runs fn on an observed instance of each backend.
func eachObserved(t *testing.T, fn func(t *testing.T, o observed)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			fn(t, setupObserved(t, b))
		})
	}
}

const (
	claimRoute  = "POST /v1/promotions/{id}/claims"
	statusRoute = "GET /v1/promotions/{id}/claims/{user_id}"
	joinRoute   = "POST /v1/promotions/{id}/queue"
	queueRoute  = "GET /v1/promotions/{id}/queue/{user_id}"
)

// TestClaimOfClientThatLeft: a claim whose client hangs up right after
// sending it is still taken — its retry with the same Idempotency-Key gets
// the original answer, the user's status shows it — and counted accepted;
// the request counts as 499, never as 503 unavailable, and nothing is
// logged at ERROR, only a DEBUG line that the client left.
func TestClaimOfClientThatLeft(t *testing.T) {
	t.Parallel()
	eachObserved(t, func(t *testing.T, o observed) {
		o.create(t, `{"id":"gone","stock":5}`)
		o.gone(t, "POST", "/v1/promotions/gone/claims", `{"user_id":"u1"}`, "Idempotency-Key", "k1")

		if got := o.claims("accepted"); got != 1 {
			t.Errorf("dibs_claims_total{outcome=accepted} = %v, want 1", got)
		}
		if got := o.claims(httpapi.CodeUnavailable); got != 0 {
			t.Errorf("dibs_claims_total{outcome=unavailable} = %v, want 0", got)
		}
		if got := o.requests(claimRoute, httpapi.StatusClientClosedRequest); got != 1 {
			t.Errorf("claims counted 499: %v, want 1", got)
		}
		if got := o.requests(claimRoute, http.StatusServiceUnavailable); got != 0 {
			t.Errorf("claims counted 503: %v, want 0", got)
		}
		o.noErrors(t)
		if !strings.Contains(o.log.String(), `level=DEBUG msg="client left before the answer"`) {
			t.Errorf("no DEBUG line for the client that left:\n%s", o.log)
		}

		r := o.claim(t, "gone", "u1", "Idempotency-Key", "k1")
		if r.status != http.StatusAccepted || r.header.Get("Idempotent-Replayed") != "true" || r.body["rank"] != float64(1) {
			t.Fatalf("the retry with the same key: %d %v %s", r.status, r.header, r.raw)
		}
		if c := o.counts(t, "gone"); c["accepted"] != float64(1) {
			t.Errorf("counts %v, want 1 accepted", c)
		}
	})
}

// TestReadsOfClientThatLeft: a status read and a waiting-room join whose
// client hung up count as 499, never 5xx, and log nothing at ERROR.
func TestReadsOfClientThatLeft(t *testing.T) {
	t.Parallel()
	eachObserved(t, func(t *testing.T, o observed) {
		o.roomed(t, "room", 5)
		o.create(t, `{"id":"plain","stock":5}`)
		if r := o.claim(t, "plain", "u1"); r.status != http.StatusAccepted {
			t.Fatalf("claim: %d %s", r.status, r.raw)
		}
		o.gone(t, "GET", "/v1/promotions/plain/claims/u1", "")
		o.gone(t, "POST", "/v1/promotions/room/queue", `{"user_id":"u1"}`)
		for _, route := range []string{statusRoute, joinRoute} {
			if got := o.requests(route, httpapi.StatusClientClosedRequest); got != 1 {
				t.Errorf("%s counted 499: %v, want 1", route, got)
			}
			for _, code := range []int{http.StatusInternalServerError, http.StatusServiceUnavailable} {
				if got := o.requests(route, code); got != 0 {
					t.Errorf("%s counted %d: %v, want 0", route, code, got)
				}
			}
		}
		o.noErrors(t)
	})
}

// TestStreamEndedByClientIsAnswered: a stream of server-sent events that
// its client closes — the way such a stream ends — counts as the 200 it
// answered, not as 499: its answer went out.
func TestStreamEndedByClientIsAnswered(t *testing.T) {
	t.Parallel()
	o := observe(func(tune func(*httpapi.Config)) *env { return watched(t, single, tune) })
	o.roomed(t, "room", 5)
	if r := o.join(t, "room", "u1"); r.status != http.StatusAccepted {
		t.Fatalf("join: %d %s", r.status, r.raw)
	}
	s, r := o.openEvents(t, "room", "u1")
	if s == nil {
		t.Fatalf("events: %d %s", r.status, r.raw)
	}
	if _, ok := s.next(t); !ok {
		t.Fatal("the stream ended before its first event")
	}
	s.res.Body.Close()
	wait.For(t, 10*time.Second, "the stream's end counted", func() bool {
		return o.requests(queueRoute, http.StatusOK)+o.requests(queueRoute, httpapi.StatusClientClosedRequest) > 0
	})
	if got := o.requests(queueRoute, httpapi.StatusClientClosedRequest); got != 0 {
		t.Errorf("the stream counted as 499 %v times, want 0", got)
	}
	o.noErrors(t)
}
