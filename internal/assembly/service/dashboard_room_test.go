package service

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
)

// TestDashboardRingHoldsRoomUnwatched: dibs serve hands its scheduler's
// ticks to the dashboard's ring, so a page opened after a waiting room let
// its line in shows the admissions per second and the line's length of the
// seconds nobody watched.
func TestDashboardRingHoldsRoomUnwatched(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.cfg.WaitingRoom = WaitingRoomConfig{TickMS: 20, Workers: 2,
		Secret: "k1:" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("s", 32)))}
	base, client := serve(t, s)
	do := func(method, path, body string, headers ...string) (*http.Response, map[string]any) {
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
		return resp, out
	}
	id := fmt.Sprintf("ring-%d", time.Now().UnixNano())
	start := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	if r, out := do("POST", "/v1/promotions", fmt.Sprintf(`{"id":%q,"stock":100,"starts_at":%q,"waiting_room":{"enabled":true,"admit_per_second":10}}`, id, start),
		"Authorization", "Bearer t"); r.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %v", r.StatusCode, out)
	}
	// 30 users let in at 10 a second: three seconds of admissions, sampled
	// with no page open.
	const users = 30
	for i := range users {
		if r, out := do("POST", "/v1/promotions/"+id+"/queue", fmt.Sprintf(`{"user_id":"u%d"}`, i)); r.StatusCode >= 300 {
			t.Fatalf("join: %d %v", r.StatusCode, out)
		}
	}
	wait.For(t, 30*time.Second, "the scheduler to let the line in", func() bool {
		_, out := do("GET", "/v1/promotions/"+id, "", "Authorization", "Bearer t")
		wr, _ := out["waiting_room"].(map[string]any)
		return wr != nil && wr["admitted"] == float64(users)
	})

	r, out := do("POST", "/ui/login", `{"token":"t"}`, "Origin", base)
	if r.StatusCode != http.StatusOK || len(r.Cookies()) == 0 {
		t.Fatalf("login: %d %v", r.StatusCode, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/ui/events", nil)
	req.AddCookie(r.Cookies()[0])
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	var hist struct {
		Series map[string][][]any `json:"series"`
	}
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(data), &hist); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	pts := hist.Series[id]
	if len(pts) < 2 {
		t.Fatalf("history of the room: %v (%v)", pts, sc.Err())
	}
	// The last point is the page's own read; the ones before it were taken
	// with no page open.
	var admits, waiting float64
	for _, pt := range pts[:len(pts)-1] {
		if pt[4] != nil {
			t.Fatalf("a sample read the promotion with no page open: %v", pt)
		}
		if v, ok := pt[6].(float64); ok {
			admits = max(admits, v)
			w, ok := pt[5].(float64)
			if !ok {
				t.Fatalf("a sample with the room's tick has no line's length: %v", pt)
			}
			waiting = max(waiting, w)
		}
	}
	if admits <= 0 {
		t.Fatalf("no admissions in the ring of the seconds nobody watched: %v", pts)
	}
	if waiting <= 0 || waiting > users {
		t.Fatalf("the line's length in the ring of the seconds nobody watched peaks at %v; want 1 to %d: %v", waiting, users, pts)
	}
	t.Logf("peak %v admitted/s and %v waiting with no page open", admits, waiting)
}
