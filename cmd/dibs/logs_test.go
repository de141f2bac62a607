package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dibsio/dibs/client"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/partnertest"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/servetest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// instanceWarnings are the warnings about the instance as a whole, which
// name no promotion.
var instanceWarnings = []string{
	"no waiting-room secret configured",
}

// TestServeLogsJSON: with --log-format json every line dibs serve writes to
// standard error is one JSON object — the stream runtime's included — while
// claims meet a webhook partner that is down and Redis restarts empty (it
// keeps nothing: AOF off), and every warning about a promotion's work names
// the promotion; the log starts with the start line
// and a SIGTERM ends it with the stopped line. A problem's request_id is on
// the access log line of its request.
func TestServeLogsJSON(t *testing.T) {
	t.Parallel()
	partner := partnertest.New(t)
	partner.SetDown(true)
	redis := redistest.Fresh(t, redisserver.Options{AppendFsync: "off"})
	p := servetest.Start(t, servetest.Options{Binary: dibsBinary(t), Redis: redis.Addr(),
		DB: "sqlite://" + filepath.Join(t.TempDir(), "dibs.db"), AdminToken: opsToken, Instance: "jsonlog",
		LogFormat: "json", Config: servetest.FastRecovery + "http:\n  access_log: true\n", Env: []string{"DIBS_WEBHOOK_SECRET=logs-test-webhook-secret-0123456789"}})
	c, err := client.New("http://"+p.Addr, client.WithAdminToken(opsToken))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: "hook", Stock: 10, Kind: "webhook", WebhookURL: partner.URL()}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"u1", "u2", "u3"} {
		if _, err := c.Claim(ctx, "hook", u); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.GetPromotion(ctx, "nosuch")
	wait.For(t, 30*time.Second, "the pool's warning about the partner", func() bool {
		return strings.Contains(p.LogTail(1000), "stream handler reported a transient failure")
	})
	// Redis restarts with nothing kept; claims come back once the instance
	// has rebuilt the promotion from the database.
	if err := redis.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 60*time.Second, "a claim after Redis restarted", func() bool {
		_, err := c.Claim(ctx, "hook", "u4")
		return err == nil
	})
	p.Signal(syscall.SIGTERM)
	p.WaitExit(servetest.KillTimeout)

	msgs := map[string]map[string]any{}
	for _, l := range p.Lines() {
		var m map[string]any
		if err := json.Unmarshal([]byte(l.Raw), &m); err != nil {
			t.Errorf("a line that is no JSON object: %v: %s", err, l.Raw)
			continue
		}
		msg, _ := m["msg"].(string)
		msgs[msg] = m
		if lv := m["level"]; (lv == "WARN" || lv == "ERROR") && m["promotion"] == nil && !instanceWarning(msg) {
			t.Errorf("a warning that names no promotion: %s", l.Raw)
		}
	}
	if w := msgs["stream handler reported a transient failure; pausing"]; w["promotion"] != "hook" || !strings.Contains(w["err"].(string), "503") {
		t.Errorf("the pool's warning: %v", w)
	}
	if s := msgs["starting"]; s["instance"] != "jsonlog" || s["database"] != "sqlite" || s["redis_embedded"] != false {
		t.Errorf("start line: %v", s)
	}
	if s := msgs["stopped"]; s == nil || p.ExitCode() != 0 {
		t.Errorf("no stopped line (exit %d): %v", p.ExitCode(), s)
	}
	// The problem's request_id is on its request's line of the access log.
	pr, ok := err.(*client.Problem)
	if !ok || pr.RequestID == "" {
		t.Fatalf("problem %v", err)
	}
	for _, l := range p.Lines() {
		if strings.Contains(l.Raw, `"request_id":"`+pr.RequestID+`"`) && strings.Contains(l.Raw, `"status":404`) {
			return
		}
	}
	t.Errorf("no line of the log names the request %s", pr.RequestID)
}

func instanceWarning(msg string) bool {
	for _, w := range instanceWarnings {
		if strings.HasPrefix(msg, w) {
			return true
		}
	}
	return false
}
