package edge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// ok is a handler that answers 200 with the user and client it saw.
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	user, _ := UserFrom(r.Context())
	ip, _ := ClientIPFrom(r.Context())
	w.Header().Set("X-User", user)
	w.Header().Set("X-Client", ip.String())
	w.WriteHeader(http.StatusOK)
})

// mustNew builds an Edge or fails the test.
func mustNew(t *testing.T, cfg Config) *Edge {
	t.Helper()
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// problemOf decodes a problem answer.
func problemOf(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, rec.Body)
	}
	var p map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", rec.Body, err)
	}
	return p
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	on := Limit{Requests: 1}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // substring of the error naming the field; "" for none
	}{
		{"zero", Config{}, ""},
		{"trusted", Config{TrustedProxies: []string{"10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "::ffff:10.0.0.0/104"}}, ""},
		{"bad proxy", Config{TrustedProxies: []string{"10.0.0.0/8", "proxy.local"}}, "trusted_proxies[1]"},
		{"bad prefix", Config{TrustedProxies: []string{"10.0.0.0/33"}}, "trusted_proxies[0]"},
		{"zone", Config{TrustedProxies: []string{"fe80::1%eth0"}}, "trusted_proxies[0]"},
		{"backend", Config{RateLimits: RateLimitConfig{Backend: "memcached"}}, "rate_limits.backend"},
		{"ipv6 prefix", Config{RateLimits: RateLimitConfig{IPv6PrefixLen: 129}}, "rate_limits.ipv6_prefix_len"},
		{"negative requests", Config{RateLimits: RateLimitConfig{Claim: Limits{PerIP: Limit{Requests: -1}}}}, "rate_limits.claim.per_ip.requests"},
		{"negative window", Config{RateLimits: RateLimitConfig{Join: Limits{PerUser: Limit{Requests: 1, WindowSeconds: -1}}}}, "rate_limits.join.per_user.window_seconds"},
		{"negative burst", Config{RateLimits: RateLimitConfig{Join: Limits{PerIP: Limit{Requests: 1, Burst: -2}}}}, "rate_limits.join.per_ip.burst"},
		{"too fast", Config{RateLimits: RateLimitConfig{Claim: Limits{PerUser: Limit{Requests: 2_000_000}}}}, "rate_limits.claim.per_user"},
		{"limit ok", Config{RateLimits: RateLimitConfig{Backend: BackendLocal, Claim: Limits{PerUser: on}}}, ""},
		{"algorithm", Config{UserTokens: UserTokenConfig{Algorithm: "none"}}, "user_tokens.algorithm"},
		{"alg case", Config{UserTokens: UserTokenConfig{Algorithm: "hs256"}}, "user_tokens.algorithm"},
		{"short secret", Config{UserTokens: UserTokenConfig{Algorithm: AlgHS256, Secret: "short"}}, "user_tokens.secret"},
		{"no key", Config{UserTokens: UserTokenConfig{Algorithm: AlgRS256}}, "user_tokens.public_key"},
		{"origin path", Config{CORS: CORSConfig{AllowedOrigins: []string{"https://a.example/"}}}, "cors.allowed_origins[0]"},
		{"origin case", Config{CORS: CORSConfig{AllowedOrigins: []string{"https://A.example"}}}, "cors.allowed_origins[0]"},
		{"origin scheme", Config{CORS: CORSConfig{AllowedOrigins: []string{"https://a.example", "ftp://b.example"}}}, "cors.allowed_origins[1]"},
		{"star with credentials", Config{CORS: CORSConfig{AllowedOrigins: []string{"*"}, AllowCredentials: true}}, "allow_credentials"},
		{"origins ok", Config{CORS: CORSConfig{AllowedOrigins: []string{"https://a.example", "http://localhost:3000"}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tc.cfg, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestRedisBackendNeedsClient(t *testing.T) {
	t.Parallel()
	_, err := New(Config{RateLimits: RateLimitConfig{Claim: Limits{PerIP: Limit{Requests: 1}}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "Redis client") {
		t.Fatalf("New: %v, want an error about the Redis client", err)
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := Config{RateLimits: RateLimitConfig{Claim: Limits{PerUser: Limit{Requests: 5, WindowSeconds: 10}}}}.withDefaults()
	l := c.RateLimits.Claim.PerUser
	if l.Window != 10*time.Second || l.Burst != 5 {
		t.Errorf("limit %+v, want window 10s and burst 5", l)
	}
	if c.RateLimits.Backend != DefaultRateLimitBackend || c.RateLimits.Timeout != DefaultRateLimitTimeout ||
		c.RateLimits.IPv6PrefixLen != DefaultIPv6PrefixLen || c.UserTokens.Leeway != DefaultLeeway ||
		c.CORS.MaxAge != DefaultCORSMaxAge || c.KeyPrefix == "" {
		t.Errorf("defaults not filled in: %+v", c)
	}
	if got := (Config{UserTokens: UserTokenConfig{LeewaySeconds: -1}}).withDefaults().UserTokens.Leeway; got != 0 {
		t.Errorf("negative leeway gave %s, want 0", got)
	}
}

func TestApplyEnv(t *testing.T) {
	t.Parallel()
	c := Config{UserTokens: UserTokenConfig{Secret: "from-file", PublicKey: "file-pem"}}
	env := map[string]string{EnvUserTokenSecret: "from-env", EnvUserTokenPublicKey: ""}
	c.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if c.UserTokens.Secret != "from-env" || c.UserTokens.PublicKey != "file-pem" {
		t.Errorf("after ApplyEnv: %+v", c.UserTokens)
	}
}

func TestZeroConfigPassesThrough(t *testing.T) {
	t.Parallel()
	e := mustNew(t, Config{})
	h := e.Wrap(KindClaim, func(r *http.Request) string { return r.PathValue("id") }, ok)
	req := httptest.NewRequest("POST", "/v1/promotions/p/claims", nil)
	req.RemoteAddr = "198.51.100.9:5555"
	req.Header.Set("X-Forwarded-For", "203.0.113.1")
	req.Header.Set("Origin", "https://evil.example")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Header().Get("X-Client") != "198.51.100.9" {
		t.Fatalf("got %d client %q", rec.Code, rec.Header().Get("X-Client"))
	}
	for k := range rec.Header() {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("CORS header %s without CORS configured", k)
		}
	}
}

func TestRetrySeconds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int{
		0: 1, time.Microsecond: 1, time.Second: 1, time.Second + 1: 2, 2500 * time.Millisecond: 3, time.Minute: 60,
	} {
		if got := retrySeconds(d); got != want {
			t.Errorf("retrySeconds(%s) = %d, want %d", d, got, want)
		}
	}
}
