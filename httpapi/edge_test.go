package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/httpapi/edge"
)

const userSecret = "a user-token secret of at least thirty-two bytes"

// userToken mints an HS256 user token for user, valid for a minute.
func userToken(t *testing.T, user string) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject: user, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Minute)),
	}).SignedString([]byte(userSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEdgeGuardsClaims: with user tokens on, a claim needs the user's
// token and acts for its user; a body naming another user is refused; a
// user's claims are shown to that user or an admin only; CORS answers an
// allowed origin's preflight; a client over its rate limit gets 429
// overloaded with Retry-After, and nothing is taken.
func TestEdgeGuardsClaims(t *testing.T) {
	t.Parallel()
	e := setupWith(t, single, func(c *httpapi.Config) {
		c.Edge = edge.Config{
			UserTokens: edge.UserTokenConfig{Algorithm: edge.AlgHS256, Secret: userSecret},
			CORS:       edge.CORSConfig{AllowedOrigins: []string{"https://shop.example"}},
			RateLimits: edge.RateLimitConfig{Claim: edge.Limits{PerIP: edge.Limit{Requests: 3, WindowSeconds: 3600}}},
		}
	})
	e.create(t, `{"id":"edge","stock":10}`)

	if r := e.claim(t, "edge", "u1"); r.status != http.StatusUnauthorized || r.code() != "unauthorized" || r.header.Get("WWW-Authenticate") == "" {
		t.Fatalf("claim without a token: %d %s, want 401 unauthorized", r.status, r.raw)
	}
	if r := e.claim(t, "edge", "u2", "Authorization", "Bearer "+userToken(t, "u1")); r.status != http.StatusBadRequest || r.body["field"] != "user_id" {
		t.Fatalf("claim for another user: %d %s, want 400 naming user_id", r.status, r.raw)
	}
	r := e.do(t, "POST", "/v1/promotions/edge/claims", `{}`, "Authorization", "Bearer "+userToken(t, "u1"))
	if r.status != http.StatusAccepted || r.body["rank"] != float64(1) {
		t.Fatalf("claim with u1's token and no user_id: %d %s, want 202 rank 1", r.status, r.raw)
	}
	if r := e.do(t, "GET", "/v1/promotions/edge/claims/u1", "", "Authorization", "Bearer "+userToken(t, "u2")); r.status != http.StatusBadRequest {
		t.Fatalf("u1's claims with u2's token: %d %s, want 400", r.status, r.raw)
	}
	for _, auth := range []string{"Bearer " + userToken(t, "u1"), "Bearer " + token} {
		if r := e.do(t, "GET", "/v1/promotions/edge/claims/u1", "", "Authorization", auth); r.status != http.StatusOK {
			t.Fatalf("u1's claims as u1 or admin: %d %s, want 200", r.status, r.raw)
		}
	}

	r = e.do(t, "OPTIONS", "/v1/promotions/edge/claims", "", "Origin", "https://shop.example", "Access-Control-Request-Method", "POST")
	if r.status != http.StatusNoContent || r.header.Get("Access-Control-Allow-Origin") != "https://shop.example" {
		t.Fatalf("preflight: %d %v, want 204 allowing the origin", r.status, r.header)
	}
	if r := e.do(t, "OPTIONS", "/v1/promotions/edge/claims", "", "Origin", "https://evil.example", "Access-Control-Request-Method", "POST"); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight of another origin allowed: %v", r.header)
	}

	// Three claims per hour from one address: the two above counted (the
	// 400 one too), this one is the third, the fourth is refused.
	if r := e.do(t, "POST", "/v1/promotions/edge/claims", `{}`, "Authorization", "Bearer "+userToken(t, "u3")); r.status != http.StatusAccepted {
		t.Fatalf("third claim: %d %s", r.status, r.raw)
	}
	r = e.do(t, "POST", "/v1/promotions/edge/claims", `{}`, "Authorization", "Bearer "+userToken(t, "u4"))
	if r.status != http.StatusTooManyRequests || r.code() != "overloaded" || r.header.Get("Retry-After") == "" {
		t.Fatalf("fourth claim: %d %s, want 429 overloaded with Retry-After", r.status, r.raw)
	}
	if c := e.counts(t, "edge"); c["accepted"] != float64(2) {
		t.Fatalf("accepted %v after the refused claim, want 2", c["accepted"])
	}
}
