package service

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/partnertest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// logLines decodes the JSON lines logged into b so far; a line that is no
// JSON object fails the test.
func logLines(t *testing.T, b *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %v\n%s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// post sends body to url with the admin token and returns the status and
// the answer.
func post(t *testing.T, client *http.Client, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer t")
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOneLoggerForEveryPart: the logger the service is given receives the
// lines of every part, the stream runtime's included, and a warning about
// a promotion's work names the promotion and the error. The promotion's
// webhook partner is down, so its confirmation pool pauses.
func TestOneLoggerForEveryPart(t *testing.T) {
	t.Parallel()
	partner := partnertest.New(t)
	partner.SetDown(true)
	s := setup(t)
	logs := &syncBuffer{}
	s.cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	s.cfg.Issue.WebhookSecret = "logging-test-webhook-secret-0123456789"
	s, err := New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	base, client := serve(t, s)
	ends := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if st, body := post(t, client, base+"/v1/promotions", `{"id":"partnerdown","stock":5,"kind":"webhook","webhook_url":"`+
		partner.URL()+`","ends_at":"`+ends+`"}`); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, body)
	}
	if st, body := post(t, client, base+"/v1/promotions/partnerdown/claims", `{"user_id":"u1"}`); st != http.StatusAccepted {
		t.Fatalf("claim: %d %s", st, body)
	}
	const paused = "stream handler reported a transient failure; pausing"
	var line map[string]any
	wait.For(t, 30*time.Second, "the pool's warning in the service's log", func() bool {
		for _, l := range logLines(t, logs) {
			if l["msg"] == paused {
				line = l
				return true
			}
		}
		return false
	})
	if line["promotion"] != "partnerdown" || line["level"] != "WARN" {
		t.Errorf("the warning does not name its promotion: %v", line)
	}
	if e, _ := line["err"].(string); !strings.Contains(e, "503") {
		t.Errorf("the warning does not carry the partner's error: %v", line)
	}
}

// TestStartAndStopLines: the start line says what runs, on what, as whom;
// a clean stop ends with a "stopped" line that says what it drained.
func TestStartAndStopLines(t *testing.T) {
	t.Parallel()
	s := setup(t)
	logs := &syncBuffer{}
	s.cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	s.cfg.ConfigFile = "/etc/dibs/dibs.yaml"
	s, err := New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	byMsg := map[string]map[string]any{}
	for _, l := range logLines(t, logs) {
		byMsg[l["msg"].(string)] = l
	}
	start := byMsg["starting"]
	for k, want := range map[string]any{"database": "sqlite", "redis_mode": "single", "redis_embedded": false,
		"instance": "service-test", "config": "/etc/dibs/dibs.yaml", "redis": strings.TrimPrefix(s.cfg.Redis, "redis://")} {
		if start[k] != want {
			t.Errorf("start line: %s = %v, want %v: %v", k, start[k], want, start)
		}
	}
	if v, _ := start["schema_version"].(float64); v < 1 {
		t.Errorf("start line: no schema version: %v", start)
	}
	for _, k := range []string{"version", "commit"} {
		if start[k] == nil || start[k] == "" {
			t.Errorf("start line: no %s: %v", k, start)
		}
	}
	stopped := byMsg["stopped"]
	if stopped == nil || stopped["requests_drained"] != true || stopped["consumers_drained"] != true || stopped["pools_stopped"] == nil {
		t.Errorf("stopped line: %v", stopped)
	}
}

// TestChildLog: the embedded redis-server's output becomes one log line per
// line it writes, however its writes cut the lines; a very long line is
// cut, and says so.
func TestChildLog(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	c := &childLog{log: slog.New(slog.NewJSONHandler(logs, nil))}
	long := strings.Repeat("x", maxChildLine+10)
	for _, w := range []string{"1:M * Ready", " to accept\n2:M # WARN", "ING\r\n\n", long + "\n", "tail"} {
		if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	var got []string
	for _, l := range logLines(t, logs) {
		if l["msg"] != "redis-server" || l["level"] != "INFO" {
			t.Errorf("line %v", l)
		}
		line := l["line"].(string)
		if len(line) > 40 {
			if len(line) != maxChildLine || l["truncated"] != true {
				t.Errorf("long line: %d bytes, truncated %v", len(line), l["truncated"])
			}
			line = "long"
		}
		got = append(got, line)
	}
	if want := []string{"1:M * Ready to accept", "2:M # WARNING", "long"}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}
