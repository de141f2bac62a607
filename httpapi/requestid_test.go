package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/dibsio/dibs/httpapi"
)

// lines decodes the JSON lines written so far.
func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	text := l.String()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// TestRequestID: every answer carries X-Request-Id — the caller's when it
// is valid, else a new one, never a refusal — and a problem carries the
// same id as request_id, which the log lines of its request carry too.
func TestRequestID(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	e := setupInstance(t, backend{"single", "sqlite"}, instanceTuning{api: func(c *httpapi.Config) {
		c.AccessLog = true
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}})
	logged := func(id string) map[string]any {
		t.Helper()
		for _, l := range logs.lines(t) {
			if l["msg"] == "request" && l["request_id"] == id {
				return l
			}
		}
		t.Fatalf("no access log line with request_id %q", id)
		return nil
	}

	r := e.admin(t, "GET", "/v1/promotions/nosuch", "")
	id := r.header.Get(httpapi.RequestIDHeader)
	if r.code() != "not_found" || len(id) < 20 || r.body["request_id"] != id {
		t.Fatalf("problem %s, X-Request-Id %q", r.raw, id)
	}
	if l := logged(id); l["status"] != float64(http.StatusNotFound) || l["path"] != "/v1/promotions/nosuch" {
		t.Errorf("the access log line of the problem: %v", l)
	}

	mine := "order-42/retry.1_" + strings.Repeat("z", httpapi.MaxRequestIDLen-17)
	r = e.do(t, "POST", "/v1/promotions/nosuch/claims", `{"user_id":"u1"}`, httpapi.RequestIDHeader, mine)
	if r.header.Get(httpapi.RequestIDHeader) != mine || r.body["request_id"] != mine {
		t.Fatalf("the caller's id is not kept: %q, %s", r.header.Get(httpapi.RequestIDHeader), r.raw)
	}
	logged(mine)
	if r := e.do(t, "GET", "/healthz", "", httpapi.RequestIDHeader, mine); r.header.Get(httpapi.RequestIDHeader) != mine {
		t.Errorf("an answer that is no problem does not carry the id: %v", r.header)
	}

	for name, bad := range map[string]string{
		"too long": strings.Repeat("a", httpapi.MaxRequestIDLen+1),
		"space":    "two words",
		"control":  "tab\there",
		"8-bit":    "caf\xc3\xa9",
	} {
		t.Run(name, func(t *testing.T) {
			r := e.do(t, "GET", "/v1/promotions/nosuch", "", httpapi.RequestIDHeader, bad)
			got := r.header.Get(httpapi.RequestIDHeader)
			if r.status != http.StatusNotFound || got == "" || got == bad || r.body["request_id"] != got {
				t.Fatalf("status %d, X-Request-Id %q, body %s", r.status, got, r.raw)
			}
		})
	}
}

// TestLogHandlerOnce: a logger wrapped twice adds the request's id once,
// and a line logged outside a request carries none.
func TestLogHandlerOnce(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	log := slog.New(httpapi.LogHandler(httpapi.LogHandler(slog.NewJSONHandler(logs, nil)))).With("part", "x")
	log.InfoContext(context.Background(), "outside")
	if n := strings.Count(logs.String(), "request_id"); n != 0 {
		t.Fatalf("a line outside a request carries an id: %s", logs.String())
	}
	if h := httpapi.LogHandler(log.Handler()); h != log.Handler() {
		t.Errorf("wrapping a wrapped handler again changed it")
	}
}
