package service

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
)

// TestSchedulerAdmits: dibs serve runs the waiting-room scheduler, which
// lets a user who joined in without anyone ticking by hand, and the pass
// it hands out claims.
func TestSchedulerAdmits(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.cfg.WaitingRoom = WaitingRoomConfig{TickMS: 20, Workers: 2,
		Secret: "k1:" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("s", 32)))}
	base, client := serve(t, s)
	do := func(method, path, body string, headers ...string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	id := fmt.Sprintf("room-%d", time.Now().UnixNano())
	start := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	if code, out := do("POST", "/v1/promotions", fmt.Sprintf(`{"id":%q,"stock":3,"starts_at":%q,"waiting_room":{"enabled":true,"admit_per_second":10}}`, id, start),
		"Authorization", "Bearer t"); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, out)
	}
	if code, out := do("POST", "/v1/promotions/"+id+"/queue", `{"user_id":"u1"}`); code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("join: %d %v", code, out)
	}
	var tok string
	wait.For(t, 10*time.Second, "the scheduler to admit u1", func() bool {
		_, out := do("GET", "/v1/promotions/"+id+"/queue/u1", "")
		tok, _ = out["entry_token"].(string)
		return out["status"] == "admitted" && tok != ""
	})
	if code, out := do("POST", "/v1/promotions/"+id+"/claims", `{"user_id":"u1"}`, "X-Entry-Token", tok); code != http.StatusAccepted {
		t.Fatalf("claim with the pass: %d %v", code, out)
	}
}
