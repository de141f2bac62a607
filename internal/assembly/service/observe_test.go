package service

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a log sink the server's goroutines may write to at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// get answers the body of GET url.
func get(t *testing.T, client *http.Client, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestRequestMetricsAndAccessLog: requests are counted by the route that
// matched and their status code — a path of no route as "unmatched",
// whatever it was, so the label set stays bounded — dibs_build_info is 1,
// and with http.access_log every request is logged once, with its route.
func TestRequestMetricsAndAccessLog(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var logs syncBuffer
	s.log = slog.New(slog.NewTextHandler(&logs, nil))
	s.cfg.HTTP.AccessLog = true
	base, client := serve(t, s)

	resp, err := client.Post(base+"/v1/promotions/none/claims", "application/json", strings.NewReader(`{"user_id":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, p := range []string{"/no/such/path/1", "/no/such/path/2", "/healthz"} {
		get(t, client, base+p)
	}
	metrics := get(t, client, base+"/metrics")
	for _, want := range []string{
		`dibs_http_requests_total{code="404",route="POST /v1/promotions/{id}/claims"} 1`,
		`dibs_http_requests_total{code="404",route="unmatched"} 2`,
		`dibs_http_requests_total{code="200",route="GET /healthz"} 1`,
		`dibs_http_request_duration_seconds_count{route="GET /healthz"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, "/no/such/path") {
		t.Error("a path of no route became a label value")
	}
	if !strings.Contains(metrics, "dibs_build_info{") || !strings.Contains(metrics, `version="`) {
		t.Error("/metrics lacks dibs_build_info")
	}
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "dibs_build_info{") && !strings.HasSuffix(line, "} 1") {
			t.Errorf("dibs_build_info is not 1: %s", line)
		}
	}
	log := logs.String()
	if n := strings.Count(log, `msg=request method=POST route="POST /v1/promotions/{id}/claims" path=/v1/promotions/none/claims status=404`); n != 1 {
		t.Errorf("the claim is logged %d times, want once:\n%s", n, log)
	}
	if n := strings.Count(log, `route=unmatched path=/no/such/path/1 status=404`); n != 1 {
		t.Errorf("the unmatched request is logged %d times, want once:\n%s", n, log)
	}
}

// TestAccessLogOffByDefault: without http.access_log no request is logged.
func TestAccessLogOffByDefault(t *testing.T) {
	t.Parallel()
	s := setup(t)
	var logs syncBuffer
	s.log = slog.New(slog.NewTextHandler(&logs, nil))
	base, client := serve(t, s)
	get(t, client, base+"/healthz")
	if strings.Contains(logs.String(), "msg=request") {
		t.Fatalf("a request was logged with the access log off:\n%s", logs.String())
	}
}
