package service

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/events"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

const hookSecret = "0123456789abcdef-service"

func TestEventsConfig(t *testing.T) {
	// Not parallel: it sets the environment.
	load := func(body string) (Config, error) { return loadYAML(t, body) }
	t.Setenv(EventsSecretEnv("crm-eu"), hookSecret)
	if got := EventsSecretEnv("crm-eu"); got != "DIBS_EVENTS_SECRET_CRM_EU" {
		t.Fatalf("EventsSecretEnv = %s", got)
	}
	c, err := load(`events:
  retention_days: 3
  subscribers:
    - name: crm-eu
      url: https://crm.example/hooks
      types: [claim.issued, promotion.ended]
`)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Events.Subscribers[0]; s.Secret != hookSecret || len(s.Types) != 2 || c.Events.RetentionDays != 3 {
		t.Fatalf("events config %+v", c.Events)
	}
	for name, body := range map[string]string{
		"no secret":    "events:\n  subscribers:\n    - name: other\n      url: https://x.example/\n",
		"bad url":      "events:\n  subscribers:\n    - name: crm-eu\n      url: x.example\n",
		"unknown type": "events:\n  subscribers:\n    - name: crm-eu\n      url: https://x.example/\n      types: [claim.made]\n",
		"twice":        "events:\n  subscribers:\n    - {name: crm-eu, url: 'https://x.example/'}\n    - {name: crm-eu, url: 'https://y.example/'}\n",
		"no name":      "events:\n  subscribers:\n    - {url: 'https://x.example/', secret: " + hookSecret + "}\n",
		"timeout":      "events:\n  timeout_ms: -1\n",
		"retention":    "events:\n  retention_days: -2\n",
		"slow posts":   "events:\n  timeout_ms: 20000\n  lease_ttl_ms: 15000\n",
		"unknown key":  "events:\n  subscriber: []\n",
	} {
		if _, err := load(body); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

// TestEventsDelivered: a running service delivers the events of a claim
// and of its promotion to a configured subscriber, signed.
func TestEventsDelivered(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		got = map[string]int{}
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := events.Verify([]byte(hookSecret), r.Header.Get(events.HeaderSignature), body, time.Now(), time.Minute); err != nil {
			t.Errorf("signature: %v", err)
		}
		mu.Lock()
		got[r.Header.Get(events.HeaderEventType)]++
		mu.Unlock()
	}))
	defer hook.Close()

	s := setup(t)
	s.cfg.Events = EventsConfig{Subscribers: []events.Subscriber{{Name: "hook", URL: hook.URL, Secret: hookSecret}}}
	base, client := serve(t, s)
	post := func(path, body string, admin bool) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if admin {
			req.Header.Set("Authorization", "Bearer t")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
	}
	post("/v1/promotions", `{"id":"hooked","name":"Hooked","stock":1}`, true)
	post("/v1/promotions/hooked/claims", `{"user_id":"u1"}`, false)
	wait.For(t, 30*time.Second, "the claim's and the promotion's events delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["claim.accepted"] == 1 && got["claim.issued"] == 1 && got["promotion.opened"] == 1 && got["promotion.sold_out"] == 1
	})
}
