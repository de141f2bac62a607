package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/httpapi/edge"
	"github.com/dibsio/dibs/issue"
)

// TestIssuedGrants: once issued, a coupon claim's status shows its code
// and value, a voucher's its expiry too, a point claim's the points it
// credited; the user's balance sums the credits of every promotion.
func TestIssuedGrants(t *testing.T) {
	t.Parallel()
	codes, err := issue.NewCodes(issue.CodeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	eachBackend(t, func(t *testing.T, e *env) {
		e.create(t, `{"id":"coupon","kind":"coupon","value":500,"stock":5}`)
		e.create(t, `{"id":"voucher","kind":"voucher","value":2500,"stock":5}`)
		e.create(t, `{"id":"pts","mode":"grant","kind":"point","value":100}`)
		e.create(t, `{"id":"pts2","mode":"grant","kind":"point","value":40}`)
		for _, p := range []string{"coupon", "voucher"} {
			if r := e.claim(t, p, "u1"); r.status != http.StatusAccepted {
				t.Fatalf("claim %s: %d %s", p, r.status, r.raw)
			}
		}
		for _, p := range []string{"pts", "pts2"} {
			if r := e.admin(t, "POST", "/v1/promotions/"+p+"/grants", `{"user_ids":["u1","u2"]}`); r.status != http.StatusAccepted {
				t.Fatalf("grant %s: %d %s", p, r.status, r.raw)
			}
		}

		first := func(r response) map[string]any { return r.body["claims"].([]any)[0].(map[string]any) }
		c := first(e.waitUserStatus(t, "coupon", "u1", "issued"))
		if code, _ := c["code"].(string); !codes.Valid(code) || c["value"] != float64(500) || c["expires_at"] != nil {
			t.Fatalf("coupon claim %v: want a valid code, value 500, no expiry", c)
		}
		if again := first(e.waitUserStatus(t, "coupon", "u1", "issued")); again["code"] != c["code"] {
			t.Fatalf("coupon code changed from %v to %v", c["code"], again["code"])
		}
		v := first(e.waitUserStatus(t, "voucher", "u1", "issued"))
		exp, err := time.Parse(time.RFC3339Nano, v["expires_at"].(string))
		if code, _ := v["code"].(string); !codes.Valid(code) || code == c["code"] || v["value"] != float64(2500) || err != nil ||
			exp.Before(time.Now().Add(29*24*time.Hour)) || exp.After(time.Now().Add(31*24*time.Hour)) {
			t.Fatalf("voucher claim %v: want a fresh valid code, value 2500, expiry in 30 days", v)
		}
		p := first(e.waitUserStatus(t, "pts", "u1", "issued"))
		if p["code"] != nil || p["value"] != float64(100) || p["expires_at"] != nil {
			t.Fatalf("point claim %v: want value 100, no code", p)
		}
		e.waitUserStatus(t, "pts2", "u1", "issued")

		r := e.do(t, "GET", "/v1/users/u1/balance", "")
		if r.status != http.StatusOK || r.body["user_id"] != "u1" || r.body["balance"] != float64(140) || r.body["entries"] != float64(2) {
			t.Fatalf("balance of u1: %d %s, want 140 in 2 entries", r.status, r.raw)
		}
		r = e.do(t, "GET", "/v1/users/nobody/balance", "")
		if r.status != http.StatusOK || r.body["balance"] != float64(0) || r.body["entries"] != float64(0) {
			t.Fatalf("balance of a user without entries: %d %s, want 0", r.status, r.raw)
		}
		for _, bad := range []string{"-bad", "a%20b", strings.Repeat("x", 65)} {
			r := e.do(t, "GET", "/v1/users/"+bad+"/balance", "")
			if r.status != http.StatusBadRequest || r.code() != "invalid_request" || r.body["field"] != "user_id" {
				t.Fatalf("balance of %q: %d %s, want 400 invalid_request naming user_id", bad, r.status, r.raw)
			}
		}
	})
}

// TestBalanceUserOnly: with user tokens on, a balance is shown to its
// user's token or the admin token only.
func TestBalanceUserOnly(t *testing.T) {
	t.Parallel()
	e := setupWith(t, single, func(c *httpapi.Config) {
		c.Edge = edge.Config{UserTokens: edge.UserTokenConfig{Algorithm: edge.AlgHS256, Secret: userSecret}}
	})
	if r := e.do(t, "GET", "/v1/users/u1/balance", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("balance without a token: %d %s, want 401", r.status, r.raw)
	}
	if r := e.do(t, "GET", "/v1/users/u1/balance", "", "Authorization", "Bearer "+userToken(t, "u2")); r.status != http.StatusBadRequest {
		t.Fatalf("u1's balance with u2's token: %d %s, want 400", r.status, r.raw)
	}
	for _, auth := range []string{"Bearer " + userToken(t, "u1"), "Bearer " + token} {
		if r := e.do(t, "GET", "/v1/users/u1/balance", "", "Authorization", auth); r.status != http.StatusOK {
			t.Fatalf("u1's balance as u1 or admin: %d %s, want 200", r.status, r.raw)
		}
	}
}
