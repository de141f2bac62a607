package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/httpapi/edge"
)

// shopOrigin is the page of the shop that the edge lets call dibs.
const shopOrigin = "https://shop.example"

// withShopCORS lets pages of shopOrigin call the instance, with
// credentials, as a shop in front of dibs on a sibling host would.
func withShopCORS(c *httpapi.Config) {
	c.Edge = edge.Config{CORS: edge.CORSConfig{AllowedOrigins: []string{shopOrigin}, AllowCredentials: true}}
}

// TestCORSOnlyOnPublicRoutes: the edge's CORS answers the routes a shop's
// page calls (join, claim, the promotion's status, a user's own reads) and
// no admin route: neither a preflight nor an answer of an admin route
// carries Access-Control-Allow-Origin, whatever the credentials.
func TestCORSOnlyOnPublicRoutes(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			e := setupWith(t, b, withShopCORS)
			e.create(t, `{"id":"pub","stock":5}`)
			cookie, _ := e.uiLogin(t, token)
			ck := "dibs_ui=" + cookie.Value

			public := []struct{ method, path, body string }{
				{"POST", "/v1/promotions/pub/claims", `{"user_id":"u1"}`},
				{"GET", "/v1/promotions/pub", ""},
				{"GET", "/v1/promotions/pub/claims/u1", ""},
				{"GET", "/v1/users/u1/balance", ""},
			}
			for _, p := range public {
				r := e.do(t, p.method, p.path, p.body, "Origin", shopOrigin)
				if r.status >= 300 || r.header.Get("Access-Control-Allow-Origin") != shopOrigin {
					t.Errorf("%s %s from the shop: %d %v, want it allowed", p.method, p.path, r.status, r.header)
				}
				r = e.do(t, "OPTIONS", p.path, "", "Origin", shopOrigin, "Access-Control-Request-Method", p.method)
				if r.status != http.StatusNoContent || r.header.Get("Access-Control-Allow-Origin") != shopOrigin {
					t.Errorf("preflight of %s %s: %d %v, want 204 allowing the shop", p.method, p.path, r.status, r.header)
				}
			}
			if r := e.do(t, "OPTIONS", "/v1/promotions/pub/queue", "", "Origin", shopOrigin, "Access-Control-Request-Method", "POST"); r.header.Get("Access-Control-Allow-Origin") != shopOrigin {
				t.Errorf("preflight of the join: %d %v, want it allowed", r.status, r.header)
			}

			admin := []struct{ method, path string }{
				{"GET", "/v1/admin-tokens"}, {"GET", "/v1/audit"}, {"GET", "/v1/events"},
				{"GET", "/v1/promotions/pub/claims"}, {"GET", "/v1/promotions/pub/dead-letters"},
				{"POST", "/v1/promotions/pub/close"}, {"POST", "/v1/admin-tokens"}, {"GET", "/v1/promotions"},
			}
			for _, a := range admin {
				r := e.do(t, "OPTIONS", a.path, "", "Origin", shopOrigin, "Access-Control-Request-Method", a.method)
				if got := r.header.Get("Access-Control-Allow-Origin"); got != "" {
					t.Errorf("preflight of %s %s allows %q", a.method, a.path, got)
				}
				if a.method != "GET" {
					continue
				}
				for _, h := range [][]string{{"Authorization", "Bearer " + token}, {"Cookie", ck}} {
					r := e.do(t, a.method, a.path, "", append(h, "Origin", shopOrigin)...)
					if got := r.header.Get("Access-Control-Allow-Origin"); got != "" || r.header.Get("Access-Control-Allow-Credentials") != "" {
						t.Errorf("%s %s with %s from the shop: %d, Access-Control-Allow-Origin %q", a.method, a.path, h[0], r.status, got)
					}
				}
			}
		})
	}
}

// TestDashboardCookieOtherOrigin: a request authenticated by the
// dashboard's cookie whose Origin is not the server's own gets 403
// forbidden, also for a read, and even from an origin CORS allows; the
// page's own origin, or no Origin at all, reads as before, and a bearer
// token is not concerned.
func TestDashboardCookieOtherOrigin(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			e := setupWith(t, b, withShopCORS)
			e.create(t, `{"id":"own","stock":5}`)
			cookie, _ := e.uiLogin(t, token)
			ck := "dibs_ui=" + cookie.Value
			u, err := url.Parse(e.url)
			if err != nil {
				t.Fatal(err)
			}
			reads := []string{"/v1/admin-tokens", "/v1/audit", "/v1/events", "/v1/promotions/own/claims",
				"/v1/promotions/own/dead-letters", "/ui/session"}
			for _, path := range reads {
				for _, origin := range []string{shopOrigin, "https://evil.example", "null", "http://" + u.Host + ".evil.example"} {
					r := e.do(t, "GET", path, "", "Cookie", ck, "Origin", origin)
					if r.status != http.StatusForbidden || r.code() != "forbidden" {
						t.Errorf("GET %s with the cookie from %s: %d %s, want 403 forbidden", path, origin, r.status, r.raw)
					}
				}
				for _, h := range [][]string{
					{"Cookie", ck},
					{"Cookie", ck, "Origin", e.url},
					{"Authorization", "Bearer " + token, "Origin", shopOrigin},
				} {
					if path == "/ui/session" && h[0] != "Cookie" {
						continue
					}
					if r := e.do(t, "GET", path, "", h...); r.status != http.StatusOK {
						t.Errorf("GET %s with %v: %d %s, want 200", path, h, r.status, r.raw)
					}
				}
			}
		})
	}
}

// TestOwnOriginScheme: the server's own origin is its Host with the
// scheme the request came by: https behind a trusted proxy that says so
// (X-Forwarded-Proto), so a page of the same host served over plain http
// is another origin; from a peer that is not a trusted proxy the scheme
// is unknown and either is the server's.
func TestOwnOriginScheme(t *testing.T) {
	t.Parallel()
	e := setupWith(t, backend{"single", "sqlite"}, func(c *httpapi.Config) {
		c.Edge = edge.Config{TrustedProxies: []string{"127.0.0.1", "::1"}}
	})
	cookie, _ := e.uiLogin(t, token)
	ck := "dibs_ui=" + cookie.Value
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		proto, origin string
		status        int
	}{
		{"https", "https://" + u.Host, 200},
		{"https", "http://" + u.Host, 403},
		{"http", "http://" + u.Host, 200},
		{"http", "https://" + u.Host, 403},
		{"", "https://" + u.Host, 200},
		{"", "http://" + u.Host, 200},
		{"https", "https://other.example", 403},
	}
	for _, c := range cases {
		h := []string{"Cookie", ck, "Origin", c.origin}
		if c.proto != "" {
			h = append(h, "X-Forwarded-Proto", c.proto)
		}
		if r := e.do(t, "GET", "/v1/admin-tokens", "", h...); r.status != c.status {
			t.Errorf("X-Forwarded-Proto %q, Origin %s: %d %s, want %d", c.proto, c.origin, r.status, r.raw, c.status)
		}
	}
}
