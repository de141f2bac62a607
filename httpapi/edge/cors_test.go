package edge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func corsHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out[k] = strings.Join(v, ",")
		}
	}
	return out
}

func TestCORS(t *testing.T) {
	t.Parallel()
	exact := mustNew(t, Config{CORS: CORSConfig{AllowedOrigins: []string{"https://shop.example", "http://localhost:3000"}, MaxAgeSeconds: 300}})
	creds := mustNew(t, Config{CORS: CORSConfig{AllowedOrigins: []string{"https://shop.example"}, AllowCredentials: true}})
	star := mustNew(t, Config{CORS: CORSConfig{AllowedOrigins: []string{"*"}}})
	type want struct {
		code    int
		reached bool              // the wrapped handler ran
		headers map[string]string // exactly these Access-Control-* headers
	}
	preflightOK := map[string]string{
		"Access-Control-Allow-Origin":  "https://shop.example",
		"Access-Control-Allow-Methods": "GET, POST",
		"Access-Control-Allow-Headers": "Authorization, Content-Type, Idempotency-Key, X-Entry-Token, X-Request-Id",
		"Access-Control-Max-Age":       "300",
	}
	for _, tc := range []struct {
		name   string
		e      *Edge
		method string
		hdr    map[string]string
		want   want
	}{
		{"preflight, allowed", exact, "OPTIONS", map[string]string{"Origin": "https://shop.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, idempotency-key"},
			want{204, false, preflightOK}},
		{"preflight, other origin", exact, "OPTIONS", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
			want{204, false, map[string]string{}}},
		{"preflight, origin differs in case", exact, "OPTIONS", map[string]string{"Origin": "https://SHOP.example", "Access-Control-Request-Method": "POST"},
			want{204, false, map[string]string{}}},
		{"preflight, origin with a path-like suffix", exact, "OPTIONS", map[string]string{"Origin": "https://shop.example.evil.example", "Access-Control-Request-Method": "POST"},
			want{204, false, map[string]string{}}},
		{"preflight, method not allowed", exact, "OPTIONS", map[string]string{"Origin": "https://shop.example", "Access-Control-Request-Method": "DELETE"},
			want{204, false, map[string]string{}}},
		{"plain OPTIONS goes to the handler", exact, "OPTIONS", map[string]string{"Origin": "https://shop.example"},
			want{200, true, map[string]string{"Access-Control-Allow-Origin": "https://shop.example", "Access-Control-Expose-Headers": "Retry-After, Idempotent-Replayed, X-Request-Id"}}},
		{"request, allowed", exact, "POST", map[string]string{"Origin": "http://localhost:3000"},
			want{200, true, map[string]string{"Access-Control-Allow-Origin": "http://localhost:3000", "Access-Control-Expose-Headers": "Retry-After, Idempotent-Replayed, X-Request-Id"}}},
		{"request, other origin", exact, "POST", map[string]string{"Origin": "https://evil.example"},
			want{200, true, map[string]string{}}},
		{"request, null origin", exact, "POST", map[string]string{"Origin": "null"},
			want{200, true, map[string]string{}}},
		{"request, no origin", exact, "POST", nil,
			want{200, true, map[string]string{}}},
		{"credentials", creds, "POST", map[string]string{"Origin": "https://shop.example"},
			want{200, true, map[string]string{"Access-Control-Allow-Origin": "https://shop.example", "Access-Control-Allow-Credentials": "true", "Access-Control-Expose-Headers": "Retry-After, Idempotent-Replayed, X-Request-Id"}}},
		{"star", star, "POST", map[string]string{"Origin": "https://any.example"},
			want{200, true, map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": "Retry-After, Idempotent-Replayed, X-Request-Id"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(tc.method, "/v1/promotions/p/claims", nil)
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			reached := false
			tc.e.CORS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached = true
				w.WriteHeader(200)
			})).ServeHTTP(rec, req)
			if rec.Code != tc.want.code || reached != tc.want.reached {
				t.Fatalf("status %d reached %v, want %d %v", rec.Code, reached, tc.want.code, tc.want.reached)
			}
			got := corsHeaders(rec.Header())
			if len(got) != len(tc.want.headers) {
				t.Fatalf("CORS headers %v, want %v", got, tc.want.headers)
			}
			for k, v := range tc.want.headers {
				if got[k] != v {
					t.Fatalf("%s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			if !strings.Contains(strings.Join(rec.Header().Values("Vary"), ","), "Origin") {
				t.Fatalf("Vary %q lacks Origin", rec.Header().Values("Vary"))
			}
		})
	}
}

// A problem written inside a CORS-wrapped handler keeps the CORS headers,
// so a browser page can read a 401 or a 429.
func TestCORSOnProblems(t *testing.T) {
	t.Parallel()
	e := mustNew(t, Config{
		CORS:       CORSConfig{AllowedOrigins: []string{"https://shop.example"}},
		UserTokens: UserTokenConfig{Algorithm: AlgHS256, Secret: testSecret},
	})
	req := httptest.NewRequest("POST", "/v1/promotions/p/claims", nil)
	req.Header.Set("Origin", "https://shop.example")
	rec := httptest.NewRecorder()
	e.Wrap(KindClaim, func(r *http.Request) string { return "p" }, ok).ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || rec.Header().Get("Access-Control-Allow-Origin") != "https://shop.example" {
		t.Fatalf("status %d, headers %v", rec.Code, rec.Header())
	}
}

// CORSMethods answers the preflights of its methods only, and lists them
// alone: a path whose POST is open to other origins and whose GET is not
// tells a browser so before it sends the GET.
func TestCORSMethods(t *testing.T) {
	t.Parallel()
	e := mustNew(t, Config{CORS: CORSConfig{AllowedOrigins: []string{"https://shop.example"}}})
	for _, tc := range []struct {
		methods []string
		ask     string
		allow   string // Access-Control-Allow-Methods; "" for a refused preflight
	}{
		{[]string{"POST"}, "POST", "POST"},
		{[]string{"POST"}, "GET", ""},
		{[]string{"POST"}, "HEAD", ""},
		{[]string{"GET"}, "GET", "GET"},
		{[]string{"GET"}, "HEAD", "GET"},
		{[]string{"GET"}, "POST", ""},
		{[]string{"GET", "POST"}, "POST", "GET, POST"},
		{[]string{"GET", "POST"}, "PATCH", ""},
	} {
		req := httptest.NewRequest("OPTIONS", "/v1/promotions/p/claims", nil)
		req.Header.Set("Origin", "https://shop.example")
		req.Header.Set("Access-Control-Request-Method", tc.ask)
		rec := httptest.NewRecorder()
		e.CORSMethods(ok, tc.methods...).ServeHTTP(rec, req)
		got := rec.Header().Get("Access-Control-Allow-Methods")
		origin := rec.Header().Get("Access-Control-Allow-Origin")
		if rec.Code != http.StatusNoContent || got != tc.allow || (tc.allow == "") != (origin == "") {
			t.Errorf("%v asked for %s: %d, Allow-Methods %q, Allow-Origin %q; want 204, %q", tc.methods, tc.ask, rec.Code, got, origin, tc.allow)
		}
	}
}
