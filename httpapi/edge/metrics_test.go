package edge

import (
	"net/http/httptest"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	c := newClock()
	e := mustNew(t, Config{
		Metrics:    m,
		Now:        c.now,
		UserTokens: UserTokenConfig{Algorithm: AlgHS256, Secrets: "k1:" + testSecret},
		RateLimits: RateLimitConfig{Backend: BackendLocal, Claim: Limits{
			PerUser: Limit{Requests: 1, WindowSeconds: 60},
			PerIP:   Limit{Requests: 2, WindowSeconds: 60},
		}},
		CORS: CORSConfig{AllowedOrigins: []string{"https://shop.example"}},
	})
	h := e.Wrap(KindClaim, promo, ok)
	send := func(auth, peer string) int {
		r := claimReq("m-promo", peer)
		if auth != "" {
			r.Header.Set("Authorization", "Bearer "+auth)
		}
		return serve(h, r).Code
	}
	tok := func(user, kid string, cl func(*jwt.RegisteredClaims)) string {
		c := claims(user)
		c.IssuedAt = nil
		c.ExpiresAt = jwt.NewNumericDate(newClock().now().Add(3600e9))
		if cl != nil {
			cl(&c)
		}
		return signKid(t, jwt.SigningMethodHS256, c, []byte(testSecret), kid)
	}

	// Tokens refused, one of each kind.
	for _, tc := range []struct {
		auth string
		want string
	}{
		{"", ReasonMissing},
		{"not.a.jwt", ReasonMalformed},
		{tok("u-1", "k9", nil), ReasonUnknownKey},
		{signKid(t, jwt.SigningMethodHS256, claims("u-1"), []byte(testSecret+"x"), "k1"), ReasonSignature},
		{tok("u-1", "k1", func(c *jwt.RegisteredClaims) { c.ExpiresAt = jwt.NewNumericDate(newClock().now().Add(-3600e9)) }), ReasonExpired},
		{tok("-bad", "k1", nil), ReasonSubject},
	} {
		if code := send(tc.auth, "198.51.100.50:1"); code != 401 {
			t.Fatalf("%s: status %d, want 401", tc.want, code)
		}
		if got := value(t, reg, "dibs_edge_user_token_refused_total", tc.want); got != 1 {
			t.Fatalf("refused{reason=%q} = %v, want 1", tc.want, got)
		}
	}

	// The per-user limit refuses u-1's second claim; the per-IP one the
	// third claim from one address.
	if code := send(tok("u-1", "k1", nil), "198.51.100.1:1"); code != 200 {
		t.Fatalf("first claim: %d", code)
	}
	if code := send(tok("u-1", "k1", nil), "198.51.100.2:1"); code != 429 {
		t.Fatalf("u-1 again: %d, want 429", code)
	}
	if code := send(tok("u-2", "k1", nil), "198.51.100.1:1"); code != 200 {
		t.Fatalf("u-2: %d", code)
	}
	if code := send(tok("u-3", "k1", nil), "198.51.100.1:1"); code != 429 {
		t.Fatalf("third from one address: %d, want 429", code)
	}
	if u, ip := value(t, reg, "dibs_edge_rate_limited_total", ScopeUser), value(t, reg, "dibs_edge_rate_limited_total", ScopeIP); u != 1 || ip != 1 {
		t.Fatalf("rate limited user %v, ip %v; want 1 and 1", u, ip)
	}

	// Preflights: one allowed, two refused.
	for _, tc := range []struct{ origin, method string }{
		{"https://shop.example", "POST"}, {"https://evil.example", "POST"}, {"https://shop.example", "DELETE"},
	} {
		r := httptest.NewRequest("OPTIONS", "/v1/promotions/m-promo/claims", nil)
		r.Header.Set("Origin", tc.origin)
		r.Header.Set("Access-Control-Request-Method", tc.method)
		serve(h, r)
	}
	if got := value(t, reg, "dibs_edge_cors_preflight_refused_total", ""); got != 2 {
		t.Fatalf("preflights refused %v, want 2", got)
	}

	// Every series is there from the start, and only the bounded ones.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		n += len(mf.GetMetric())
	}
	if want := 2 + 11 + 1; n != want {
		t.Fatalf("%d series, want %d", n, want)
	}
}

// A nil *Metrics counts nothing and does not panic.
func TestMetricsNil(t *testing.T) {
	t.Parallel()
	var m *Metrics
	m.rateLimitedInc(ScopeIP)
	m.tokenRefusedInc(ReasonExpired)
	m.corsPreflightInc()
}

// value reads counter name of reg, the series whose one label is label
// ("" for a counter without labels).
func value(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if l := m.GetLabel(); (label == "" && len(l) == 0) || (len(l) == 1 && l[0].GetValue() == label) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{%s}", name, label)
	return 0
}
