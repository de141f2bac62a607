package httpapi_test

import (
	"testing"
)

// TestPatchPromotion: PATCH validates strictly (unknown fields, a stock
// below what is accepted), pauses claims with 409 paused and Retry-After,
// resumes them, and revoke reports revoked and skipped claims, the claim's
// status becoming revoked.
func TestPatchPromotion(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		if r := e.admin(t, "POST", "/v1/promotions", `{"id":"pp","stock":3}`); r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
		for _, u := range []string{"a", "b"} {
			if r := e.claim(t, "pp", u); r.status != 202 {
				t.Fatalf("claim: %d %s", r.status, r.raw)
			}
		}
		for _, tc := range []struct {
			body, code string
			status     int
		}{
			{`{"colour":"red"}`, "invalid_request", 400},
			{`{"stock":0}`, "invalid_request", 400},
			{`{"stock":1}`, "stock_below_accepted", 409},
			{`{"ends_at":"yesterday"}`, "invalid_request", 400},
			{`{"paused":"yes"}`, "invalid_request", 400},
		} {
			if r := e.admin(t, "PATCH", "/v1/promotions/pp", tc.body); r.status != tc.status || r.code() != tc.code {
				t.Errorf("PATCH %s: %d %s, want %d %s", tc.body, r.status, r.raw, tc.status, tc.code)
			}
		}
		if r := e.do(t, "PATCH", "/v1/promotions/pp", `{"paused":true}`); r.status != 401 {
			t.Fatalf("PATCH without a token: %d", r.status)
		}
		r := e.admin(t, "PATCH", "/v1/promotions/pp", `{"paused":true,"name":"Renamed","stock":5}`)
		if r.status != 200 || r.body["paused"] != true || r.body["name"] != "Renamed" || r.body["stock"] != float64(5) {
			t.Fatalf("pause: %d %s", r.status, r.raw)
		}
		if r := e.claim(t, "pp", "c"); r.status != 409 || r.code() != "paused" || r.header.Get("Retry-After") != "5" {
			t.Fatalf("claim while paused: %d %s %v", r.status, r.raw, r.header)
		}
		if r := e.admin(t, "PATCH", "/v1/promotions/pp", `{"paused":false}`); r.status != 200 || r.body["paused"] != false {
			t.Fatalf("resume: %d %s", r.status, r.raw)
		}
		if r := e.claim(t, "pp", "c"); r.status != 202 {
			t.Fatalf("claim after the resume: %d %s", r.status, r.raw)
		}
		e.waitIssued(t, "pp", 3)
		if r := e.admin(t, "POST", "/v1/promotions/pp/claims/revoke", `{"claim_ids":[]}`); r.status != 400 {
			t.Fatalf("empty revoke: %d", r.status)
		}
		r = e.admin(t, "POST", "/v1/promotions/pp/claims/revoke", `{"claim_ids":["pp#1","pp#77"]}`)
		if r.status != 200 || r.body["revoked"] != float64(1) || len(r.body["skipped"].([]any)) != 1 {
			t.Fatalf("revoke: %d %s", r.status, r.raw)
		}
		e.waitUserStatus(t, "pp", "a", "revoked")
	})
}
