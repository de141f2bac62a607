package service

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// setup returns a configured, unstarted service on the binary's Redis and a
// SQLite file of the test.
func setup(t *testing.T) *Service {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Redis = "redis://" + redistest.Single(t).Addr()
	cfg.DB = "sqlite://" + filepath.Join(t.TempDir(), "dibs.db")
	cfg.AdminToken = "t"
	cfg.Instance = "service-test"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serve starts s until the test ends and returns its base URL and a client
// whose connections are closed then.
func serve(t *testing.T, s *Service) (string, *http.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return "http://" + s.Addr().String(), client
}

// TestMetricsAreTheDocumentedOnes: /metrics of a running service exports
// every dibs_ series docs/operations.md lists, and no other.
func TestMetricsAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "| metric | type | meaning |")
	table, _, _ = strings.Cut(table, "\n\n")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(dibs_[a-z_]+)").FindAllStringSubmatch(table, -1) {
		documented[m[1]] = true
	}
	if len(documented) < 10 {
		t.Fatalf("found only %v in the metrics table of docs/operations.md", documented)
	}

	base, client := serve(t, setup(t))
	// One claim on a promotion that does not exist makes the per-outcome
	// series appear; the vectors without children are announced by HELP.
	resp, err := client.Post(base+"/v1/promotions/none/claims", "application/json", strings.NewReader(`{"user_id":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# HELP (dibs_[a-z_]+) `).FindAllStringSubmatch(string(body), -1) {
		exported[m[1]] = true
	}
	for name := range documented {
		// Per-promotion, per-stream and per-subscriber vectors have no
		// series without a promotion or a webhook subscriber.
		perPromotion := strings.HasPrefix(name, "dibs_stream_") || name == "dibs_pending_claims" || name == "dibs_promotion_halted" || name == "dibs_claims_requeued_total" ||
			name == "dibs_oldest_pending_seconds" || name == "dibs_remaining" || name == "dibs_dead_letters_unhandled" ||
			strings.HasPrefix(name, "dibs_waitroom_") && name != "dibs_waitroom_metrics_errors_total" ||
			strings.HasPrefix(name, "dibs_events_") && name != "dibs_events_pruned_total"
		if !exported[name] && !perPromotion {
			t.Errorf("%s is documented but not exported", name)
		}
	}
	for name := range exported {
		if !documented[name] {
			t.Errorf("%s is exported but not documented", name)
		}
	}
}

// TestStartStop: Stop before Start and a second Stop do nothing, Start after
// Stop is refused, and a stopped service no longer listens.
func TestStartStop(t *testing.T) {
	t.Parallel()
	unstarted := setup(t)
	if err := unstarted.Stop(t.Context()); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	if err := unstarted.Start(t.Context()); err == nil {
		t.Fatal("Start after Stop: no error")
	}

	s := setup(t)
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err == nil {
		t.Fatal("second Start: no error")
	}
	addr := s.Addr().String()
	for i := range 2 {
		if err := s.Stop(t.Context()); err != nil {
			t.Fatalf("Stop %d: %v", i+1, err)
		}
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Fatal("a stopped service still answers")
	}
}
