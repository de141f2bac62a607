package httpapi_test

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/dibsio/dibs/waitroom"
)

// TestPrequeueFields: the waiting room's abandonment time and prequeue
// are validated, the seed's hash is shown from creation, and the seed only
// from starts_at on.
func TestPrequeueFields(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		for name, c := range map[string]struct{ room, field string }{
			"abandonment 0":          {`"enabled":true,"abandon_after_seconds":0`, "waiting_room.abandon_after_seconds"},
			"abandonment too short":  {`"enabled":true,"abandon_after_seconds":9`, "waiting_room.abandon_after_seconds"},
			"abandonment too long":   {`"enabled":true,"abandon_after_seconds":3601`, "waiting_room.abandon_after_seconds"},
			"prequeue negative":      {`"enabled":true,"prequeue_seconds":-1`, "waiting_room.prequeue_seconds"},
			"prequeue too long":      {`"enabled":true,"prequeue_seconds":86401`, "waiting_room.prequeue_seconds"},
			"prequeue without room":  {`"prequeue_seconds":60`, "waiting_room.prequeue_seconds"},
			"prequeue not a number":  {`"enabled":true,"prequeue_seconds":"60"`, ""},
			"abandonment fractional": {`"enabled":true,"abandon_after_seconds":12.5`, ""},
		} {
			r := e.admin(t, "POST", "/v1/promotions", fmt.Sprintf(`{"id":"bad","stock":5,"starts_at":%q,"waiting_room":{%s}}`, future, c.room))
			if r.status != http.StatusBadRequest || r.code() != "invalid_request" || (c.field != "" && r.body["field"] != c.field) {
				t.Errorf("%s: %d %s; want 400 naming %q", name, r.status, r.raw, c.field)
			}
		}
		if r := e.admin(t, "GET", "/v1/promotions/bad", ""); r.status != http.StatusNotFound {
			t.Fatalf("a refused promotion was created: %d %s", r.status, r.raw)
		}

		created := e.create(t, fmt.Sprintf(`{"id":"later","stock":5,"starts_at":%q,"waiting_room":{"enabled":true,"prequeue_seconds":600,"abandon_after_seconds":30}}`, future))
		for _, r := range []response{created, e.do(t, "GET", "/v1/promotions/later", "")} {
			wr, _ := r.body["waiting_room"].(map[string]any)
			hash, _ := wr["prequeue_seed_sha256"].(string)
			if b, err := hex.DecodeString(hash); err != nil || len(b) != 32 || wr["prequeue_seed"] != nil ||
				wr["prequeue_seconds"] != float64(600) || wr["abandon_after_seconds"] != float64(30) {
				t.Fatalf("promotion before its start: %s; want the seed's hash and no seed", r.raw)
			}
		}
		if r := e.admin(t, "GET", "/v1/promotions/later/prequeue", ""); r.status != http.StatusForbidden || r.code() != "not_started" {
			t.Fatalf("audit before the start: %d %s", r.status, r.raw)
		}
		if r := e.join(t, "later", "early"); r.status != http.StatusForbidden || r.code() != "not_started" {
			t.Fatalf("join before the prequeue opens: %d %s", r.status, r.raw)
		}

		e.roomed(t, "plain", 5)
		r := e.do(t, "GET", "/v1/promotions/plain", "")
		if wr, _ := r.body["waiting_room"].(map[string]any); wr["abandon_after_seconds"] != float64(120) ||
			wr["prequeue_seed_sha256"] != nil || wr["prequeue_seconds"] != nil {
			t.Fatalf("a room without a prequeue: %s; want the default 120 s and no seed", r.raw)
		}
		for path, want := range map[string]int{
			"/v1/promotions/plain/prequeue":   http.StatusNotFound,
			"/v1/promotions/missing/prequeue": http.StatusNotFound,
		} {
			if r := e.admin(t, "GET", path, ""); r.status != want || r.code() != "not_found" {
				t.Errorf("GET %s: %d %s; want %d", path, r.status, r.raw, want)
			}
		}
		if r := e.do(t, "GET", "/v1/promotions/later/prequeue", ""); r.status != http.StatusUnauthorized {
			t.Errorf("audit without the admin token: %d %s", r.status, r.raw)
		}
	})
}

// TestPrequeueAudit: joins after the start and before the first tick are
// collected; after the tick the audit endpoint publishes the seed (as the
// promotion does) and the join list in the shuffled order, page by page,
// which the seed reproduces.
func TestPrequeueAudit(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		start := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
		created := e.create(t, fmt.Sprintf(`{"id":"opening","stock":50,"starts_at":%q,"waiting_room":{"enabled":true,"admit_per_second":1,"prequeue_seconds":600}}`, start))
		wr, _ := created.body["waiting_room"].(map[string]any)
		seedHex, _ := wr["prequeue_seed"].(string)
		seed, err := hex.DecodeString(seedHex)
		if err != nil || len(seed) != 32 || wr["prequeue_seed_sha256"] != waitroom.SeedSHA256(seed) {
			t.Fatalf("promotion after its start: %s; want the seed and its hash", created.raw)
		}
		if r := e.admin(t, "GET", "/v1/promotions/opening/prequeue", ""); r.status != http.StatusServiceUnavailable ||
			r.code() != "unavailable" || r.header.Get("Retry-After") == "" {
			t.Fatalf("audit before the shuffle: %d %s", r.status, r.raw)
		}
		var joined []string
		for i := range 7 {
			u := fmt.Sprintf("u%d", i)
			if r := e.join(t, "opening", u); r.status != http.StatusAccepted || r.body["status"] != "prequeue" || r.body["position"] != nil ||
				r.body["shuffle_at"] == nil || r.body["poll_after_ms"] == nil {
				t.Fatalf("join of %s during the prequeue: %d %s", u, r.status, r.raw)
			}
			joined = append(joined, u)
		}
		if r := e.standing(t, "opening", "u3"); r.status != http.StatusOK || r.body["status"] != "prequeue" {
			t.Fatalf("standing during the prequeue: %d %s", r.status, r.raw)
		}
		e.tick(t, "opening")

		var users []string
		path := "/v1/promotions/opening/prequeue?limit=3"
		for page := 0; ; page++ {
			r := e.admin(t, "GET", path, "")
			if r.status != http.StatusOK || r.body["seed"] != seedHex || r.body["seed_sha256"] != waitroom.SeedSHA256(seed) ||
				r.body["total"] != float64(7) || page > 3 {
				t.Fatalf("audit page %d: %d %s", page, r.status, r.raw)
			}
			list, _ := r.body["users"].([]any)
			for _, u := range list {
				users = append(users, u.(string))
			}
			next, _ := r.body["next_cursor"].(string)
			if next == "" {
				break
			}
			path = "/v1/promotions/opening/prequeue?limit=3&cursor=" + url.QueryEscape(next)
		}
		if want := waitroom.PrequeueOrder(seed, joined); !slices.Equal(users, want) {
			t.Fatalf("audit order %v, want %v (recomputed from the seed)", users, want)
		}
		// The places follow that order.
		for i, u := range users {
			r := e.standing(t, "opening", u)
			if st := r.body["status"]; st != "admitted" && (st != "waiting" || r.body["position"].(float64) > float64(i+1)) {
				t.Fatalf("%s, %d. in the shuffle: %s", u, i+1, r.raw)
			}
		}
		if r := e.join(t, "opening", "late"); r.status != http.StatusAccepted || r.body["status"] != "waiting" {
			t.Fatalf("join after the shuffle: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "GET", "/v1/promotions/opening/prequeue?cursor=bad", ""); r.status != http.StatusBadRequest || r.body["field"] != "cursor" {
			t.Fatalf("a bad cursor: %d %s", r.status, r.raw)
		}
	})
}
