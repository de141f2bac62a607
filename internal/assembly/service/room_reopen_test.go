package service

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// roomAPI is a running service with waiting rooms ticked every 20ms, and
// a Redis client on its Redis.
type roomAPI struct {
	t      *testing.T
	base   string
	client *http.Client
	redis  rueidis.Client
}

func startRoomAPI(t *testing.T) *roomAPI {
	t.Helper()
	s := setup(t)
	s.cfg.WaitingRoom = WaitingRoomConfig{TickMS: 20, Workers: 2,
		Secret: "k1:" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("s", 32)))}
	s.cfg.Issue.WebhookSecret = strings.Repeat("w", 32)
	base, client := serve(t, s)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Single(t).Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return &roomAPI{t: t, base: base, client: client, redis: rc}
}

// do sends a request (header name, value pairs after body) and decodes the
// JSON answer.
func (a *roomAPI) do(method, path, body string, headers ...string) (int, map[string]any) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (a *roomAPI) admin(method, path, body string) (int, map[string]any) {
	a.t.Helper()
	return a.do(method, path, body, "Authorization", "Bearer t")
}

// admitted waits for user, who joined promo's room, to be let in, and
// returns the entry token.
func (a *roomAPI) admitted(promo, user string) string {
	a.t.Helper()
	var tok string
	wait.For(a.t, 15*time.Second, user+" to be let in", func() bool {
		_, out := a.do("GET", "/v1/promotions/"+promo+"/queue/"+user, "")
		tok, _ = out["entry_token"].(string)
		return out["status"] == "admitted" && tok != ""
	})
	return tok
}

func (a *roomAPI) join(promo, user string) {
	a.t.Helper()
	if code, out := a.do("POST", "/v1/promotions/"+promo+"/queue", fmt.Sprintf(`{"user_id":%q}`, user)); code != http.StatusAccepted && code != http.StatusOK {
		a.t.Fatalf("join of %s: %d %v", user, code, out)
	}
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// TestRoomAdmitsAfterReopening: a promotion that ended by its end, with a
// claim still pending (its partner answers 503, so it is not drained), is
// reopened by a later ends_at after its room's tick saw it ended: the room
// lets new users in again and their passes claim.
func TestRoomAdmitsAfterReopening(t *testing.T) {
	t.Parallel()
	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(partner.Close)
	a := startRoomAPI(t)
	id := fmt.Sprintf("reopen-%d", time.Now().UnixNano())
	if code, out := a.admin("POST", "/v1/promotions", fmt.Sprintf(`{"id":%q,"kind":"webhook","webhook_url":%q,"stock":5,"starts_at":%q,"waiting_room":{"enabled":true,"admit_per_second":100}}`,
		id, partner.URL, rfc3339(time.Now().Add(-time.Minute)))); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, out)
	}
	a.join(id, "u1")
	tok := a.admitted(id, "u1")
	if code, out := a.do("POST", "/v1/promotions/"+id+"/claims", `{"user_id":"u1"}`, "X-Entry-Token", tok); code != http.StatusAccepted {
		t.Fatalf("claim of u1: %d %v", code, out)
	}

	if code, out := a.admin("PATCH", "/v1/promotions/"+id, fmt.Sprintf(`{"ends_at":%q}`, rfc3339(time.Now().Add(2*time.Second)))); code != http.StatusOK {
		t.Fatalf("end in 2 s: %d %v", code, out)
	}
	wait.For(t, 15*time.Second, "the promotion to end", func() bool {
		code, _ := a.do("POST", "/v1/promotions/"+id+"/queue", `{"user_id":"early"}`)
		return code == http.StatusForbidden
	})
	// The room's tick saw the end: it gave its lease up.
	lease := "dibs:{" + id + "}:wr:lease"
	wait.For(t, 15*time.Second, "the room's tick to see the end", func() bool {
		n, err := a.redis.Do(t.Context(), a.redis.B().Exists().Key(lease).Build()).AsInt64()
		return err == nil && n == 0
	})

	if code, out := a.admin("PATCH", "/v1/promotions/"+id, fmt.Sprintf(`{"ends_at":%q}`, rfc3339(time.Now().Add(time.Hour)))); code != http.StatusOK {
		t.Fatalf("reopen: %d %v", code, out)
	}
	a.join(id, "u2")
	tok = a.admitted(id, "u2")
	if code, out := a.do("POST", "/v1/promotions/"+id+"/claims", `{"user_id":"u2"}`, "X-Entry-Token", tok); code != http.StatusAccepted {
		t.Fatalf("claim of u2 after the reopening: %d %v", code, out)
	}
}

// TestRoomAdmitsWithoutRegistry: the room registry key lost while users
// wait (a Redis master restored from an older snapshot, say) does not stop
// admission: the scheduler ticks the rooms the instance knows from its
// database.
func TestRoomAdmitsWithoutRegistry(t *testing.T) {
	t.Parallel()
	a := startRoomAPI(t)
	id := fmt.Sprintf("registry-%d", time.Now().UnixNano())
	if code, out := a.admin("POST", "/v1/promotions", fmt.Sprintf(`{"id":%q,"stock":10,"starts_at":%q,"waiting_room":{"enabled":true,"admit_per_second":2}}`,
		id, rfc3339(time.Now().Add(time.Second)))); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, out)
	}
	users := []string{"u1", "u2", "u3", "u4"}
	for _, u := range users {
		a.join(id, u)
	}
	a.admitted(id, "u1")
	if err := a.redis.Do(t.Context(), a.redis.B().Del().Key("dibs:waitroom:rooms").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	a.admitted(id, "u4")
}
