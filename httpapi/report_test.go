package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestReport: after a drop that sold out, GET …/report gives the claims
// from the database (accepted, issued, the lag, the timeline), the sold-out
// time and the refusals this instance counted; GET …/timeline the same
// claims per bucket; bad buckets and times are 400s, an unknown promotion
// 404, and both routes are admin only. On both databases.
func TestReport(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		e.create(t, `{"id":"drop","name":"Morning drop","stock":5}`)
		for i := range 8 {
			r := e.claim(t, "drop", fmt.Sprintf("u%d", i))
			if want := map[bool]int{true: 202, false: 410}[i < 5]; r.status != want {
				t.Fatalf("claim %d: %d %s", i, r.status, r.raw)
			}
		}
		e.waitIssued(t, "drop", 5)

		r := e.admin(t, "GET", "/v1/promotions/drop/report", "")
		if r.status != http.StatusOK {
			t.Fatalf("report: %d %s", r.status, r.raw)
		}
		b := r.body
		num := func(m map[string]any, k string) float64 { v, _ := m[k].(float64); return v }
		if num(b, "accepted") != 5 || num(b, "issued") != 5 || num(b, "pending") != 0 || b["name"] != "Morning drop" || b["state"] != "sold_out" {
			t.Fatalf("report counts: %s", r.raw)
		}
		if b["sold_out_at"] == nil || b["sold_out_at"] != b["last_accepted_at"] || b["first_accepted_at"] == nil {
			t.Fatalf("sold-out time: %s", r.raw)
		}
		rej := b["rejected"].(map[string]any)
		if num(rej, "total") != 3 || num(rej["by_code"].(map[string]any), "sold_out") != 3 || rej["scope"] != "instance" {
			t.Fatalf("rejected: %v", rej)
		}
		lag := b["issue_lag"].(map[string]any)
		if p50, p99, mx := num(lag, "p50_ms"), num(lag, "p99_ms"), num(lag, "max_ms"); p50 < 0 || p50 > p99 || p99 > mx || mx > 30_000 {
			t.Fatalf("lag: %v", lag)
		}
		rate := b["claims_per_second"].(map[string]any)
		var accepted, issued float64
		for _, x := range rate["buckets"].([]any) {
			bk := x.(map[string]any)
			accepted, issued = accepted+num(bk, "accepted"), issued+num(bk, "issued")
		}
		if accepted != 5 || issued != 5 || num(rate, "peak") <= 0 || num(rate, "bucket_seconds") != 1 {
			t.Fatalf("claims per second: %v", rate)
		}
		if dl := b["dead_letters"].(map[string]any); len(dl) != 0 || b["waiting_room"] != nil {
			t.Fatalf("dead letters %v, room %v", dl, b["waiting_room"])
		}
		if r := e.admin(t, "GET", "/v1/promotions/drop/report?bucket=1m", ""); r.status != 200 ||
			num(r.body["claims_per_second"].(map[string]any), "bucket_seconds") != 60 {
			t.Fatalf("report by the minute: %d %s", r.status, r.raw)
		}

		from := url.QueryEscape(time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))
		r = e.admin(t, "GET", "/v1/promotions/drop/timeline?from="+from, "")
		if r.status != 200 || num(r.body, "bucket_seconds") != 1 {
			t.Fatalf("timeline: %d %s", r.status, r.raw)
		}
		accepted = 0
		for _, x := range r.body["buckets"].([]any) {
			accepted += num(x.(map[string]any), "accepted")
		}
		if accepted != 5 {
			t.Fatalf("timeline accepted %v, want 5: %s", accepted, r.raw)
		}

		for _, c := range []struct {
			path, field string
			status      int
		}{
			{"/v1/promotions/drop/report?bucket=2s", "bucket", 400},
			{"/v1/promotions/drop/timeline?bucket=1d", "bucket", 400},
			{"/v1/promotions/drop/timeline?from=yesterday", "from", 400},
			{"/v1/promotions/drop/timeline?from=2026-01-01T00:00:00Z&to=2025-01-01T00:00:00Z", "to", 400},
			{"/v1/promotions/drop/timeline?from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", "bucket", 400},
			{"/v1/promotions/nope/report", "", 404},
			{"/v1/promotions/nope/timeline", "", 404},
		} {
			r := e.admin(t, "GET", c.path, "")
			if r.status != c.status || (c.field != "" && r.body["field"] != c.field) {
				t.Errorf("%s: %d %s, want %d on %q", c.path, r.status, r.raw, c.status, c.field)
			}
		}
		for _, p := range []string{"/v1/promotions/drop/report", "/v1/promotions/drop/timeline"} {
			if r := e.do(t, "GET", p, ""); r.status != 401 {
				t.Errorf("%s without a token: %d", p, r.status)
			}
		}
	})
}

// TestClaimLookup: GET /v1/claims/{claim_id} finds a first-come claim by
// its rank and a grant by its user, with the status the user's claims
// tell; an unknown promotion, a rank the database does not hold and a
// malformed id are 404s and a 400.
func TestClaimLookup(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		e.create(t, `{"id":"look","stock":5}`)
		e.create(t, `{"id":"gr@nt","mode":"grant","stock":2}`)
		if r := e.claim(t, "look", "alice"); r.status != 202 {
			t.Fatal(r.raw)
		}
		if r := e.admin(t, "POST", "/v1/promotions/gr@nt/grants", `{"user_ids":["b@b"]}`); r.status != 202 {
			t.Fatalf("grant: %d %s", r.status, r.raw)
		}
		e.waitIssued(t, "look", 1)
		e.waitIssued(t, "gr@nt", 1)
		for _, c := range []struct{ id, promo, user string }{{"look#1", "look", "alice"}, {"gr@nt@b@b", "gr@nt", "b@b"}} {
			r := e.admin(t, "GET", "/v1/claims/"+url.PathEscape(c.id), "")
			cl, _ := r.body["claim"].(map[string]any)
			if r.status != 200 || r.body["promotion_id"] != c.promo || r.body["user_id"] != c.user || cl["status"] != "issued" || cl["claim_id"] != c.id {
				t.Fatalf("%s: %d %s", c.id, r.status, r.raw)
			}
		}
		for _, c := range []struct {
			id     string
			status int
		}{{"look#2", 404}, {"nope#1", 404}, {"nope@x", 404}, {"look#x", 400}, {"look", 404}} {
			if r := e.admin(t, "GET", "/v1/claims/"+url.PathEscape(c.id), ""); r.status != c.status {
				t.Errorf("%s: %d %s, want %d", c.id, r.status, r.raw, c.status)
			}
		}
		if r := e.do(t, "GET", "/v1/claims/look%231", ""); r.status != 401 {
			t.Errorf("without a token: %d", r.status)
		}
	})
}
