package edge

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

func TestGCRA(t *testing.T) {
	t.Parallel()
	// A limit of 1 per 100µs with a burst of 3.
	const iv, burst = 100, 3
	type step struct {
		now      int64
		ok       bool
		wait     int64
		tatAfter int64
	}
	steps := []step{
		{1000, true, 0, 1100}, // an unknown bucket (tat 0) starts empty
		{1000, true, 0, 1200},
		{1000, true, 0, 1300}, // the burst is spent
		{1000, false, 100, 1300},
		{1050, false, 50, 1300}, // refill is continuous
		{1100, true, 0, 1400},   // one interval later: one more
		{1100, false, 100, 1400},
		{5000, true, 0, 5100}, // after a quiet spell the bucket is full again
		{5000, true, 0, 5200},
		{5000, true, 0, 5300},
		{5000, false, 100, 5300},
	}
	var tat int64
	for i, s := range steps {
		n, ok, wait := gcra(s.now, tat, iv, burst)
		if ok != s.ok || wait != s.wait || n != s.tatAfter {
			t.Fatalf("step %d at %d: got tat %d ok %v wait %d, want %d %v %d", i, s.now, n, ok, wait, s.tatAfter, s.ok, s.wait)
		}
		tat = n
	}
}

// TestGCRAExhaustive checks the rule over many arrival patterns: within any
// span of time d, no more than burst + d/interval requests get through, and
// a refused request was told a wait after which it would pass.
func TestGCRAExhaustive(t *testing.T) {
	t.Parallel()
	for _, iv := range []int64{1, 7, 100} {
		for burst := int64(1); burst <= 5; burst++ {
			for gap := int64(0); gap <= 2*iv; gap++ {
				var tat, now int64
				var passed []int64
				for range 60 {
					n, ok, wait := gcra(now, tat, iv, burst)
					if ok {
						passed = append(passed, now)
						tat = n
					} else if _, ok2, _ := gcra(now+wait, tat, iv, burst); !ok2 || wait <= 0 {
						t.Fatalf("iv %d burst %d gap %d: wait %d at %d does not let the request through", iv, burst, gap, wait, now)
					}
					now += gap
				}
				for i := range passed {
					for j := i; j < len(passed); j++ {
						if n, lim := int64(j-i+1), burst+(passed[j]-passed[i])/iv; n > lim {
							t.Fatalf("iv %d burst %d gap %d: %d requests within %d µs, limit %d", iv, burst, gap, n, passed[j]-passed[i], lim)
						}
					}
				}
			}
		}
	}
}

// clock is a settable time for the local limiter.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }
func newClock() *clock               { c := &clock{}; c.ns.Store(now.UnixNano()); return c }
func promo(r *http.Request) string   { return r.PathValue("id") }
func claimReq(id, peer string) *http.Request {
	req := httptest.NewRequest("POST", "/v1/promotions/"+id+"/claims", nil)
	req.SetPathValue("id", id)
	req.RemoteAddr = peer
	return req
}

// serve runs req through h and returns the answer.
func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// backend is one place the limits are kept; the same tests run on each.
type backend struct {
	name   string
	cfg    func(rl RateLimitConfig) Config
	client rueidis.Client
	local  bool // the local backend, whose clock tests drive (Redis's they cannot)
}

func backends(t *testing.T) []backend {
	t.Helper()
	var out []backend
	out = append(out, backend{name: "local", local: true, cfg: func(rl RateLimitConfig) Config {
		rl.Backend = BackendLocal
		return Config{RateLimits: rl, Now: newClock().now}
	}})
	for _, tp := range redistest.Topologies(t) {
		client := tp.Client(t)
		prefix := redistest.Prefix(t)
		out = append(out, backend{name: tp.Name, client: client, cfg: func(rl RateLimitConfig) Config {
			return Config{RateLimits: rl, KeyPrefix: prefix}
		}})
	}
	return out
}

// withTokens returns the whole edge around ok with HS256 user tokens and
// kind claim's limits lim, and a maker of claim requests to promotion id
// from a user and a peer address.
func (b backend) withTokens(t *testing.T, id string, lim Limits) (http.Handler, func(user, peer string) *http.Request) {
	t.Helper()
	cfg := b.cfg(RateLimitConfig{Claim: lim})
	cfg.UserTokens = UserTokenConfig{Algorithm: AlgHS256, Secret: testSecret}
	if !b.local {
		cfg.Now = func() time.Time { return now }
	}
	e, err := New(cfg, b.client)
	if err != nil {
		t.Fatal(err)
	}
	return e.Wrap(KindClaim, promo, ok), func(user, peer string) *http.Request {
		r := claimReq(id, peer)
		r.Header.Set("Authorization", "Bearer "+sign(t, jwt.SigningMethodHS256, claims(user), []byte(testSecret)))
		return r
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			t.Run("per IP", func(t *testing.T) {
				t.Parallel()
				cfg := b.cfg(RateLimitConfig{Claim: Limits{PerIP: Limit{Requests: 3, WindowSeconds: 60}}})
				c := newClock()
				if b.local {
					cfg.Now = c.now
				}
				e, err := New(cfg, b.client)
				if err != nil {
					t.Fatal(err)
				}
				h := e.Wrap(KindClaim, promo, ok)
				for i := range 3 {
					if rec := serve(h, claimReq("ip-promo", "198.51.100.1:1")); rec.Code != 200 {
						t.Fatalf("request %d: %d %s", i, rec.Code, rec.Body)
					}
				}
				rec := serve(h, claimReq("ip-promo", "198.51.100.1:2"))
				if rec.Code != http.StatusTooManyRequests {
					t.Fatalf("4th request: %d, want 429", rec.Code)
				}
				p := problemOf(t, rec)
				if p["code"] != CodeOverloaded || p["status"] != float64(429) {
					t.Fatalf("problem %v", p)
				}
				// 3 per minute: the next one has room in 20 s.
				if ra, _ := strconv.Atoi(rec.Header().Get("Retry-After")); ra < 19 || ra > 20 {
					t.Fatalf("Retry-After %q, want 19..20", rec.Header().Get("Retry-After"))
				}
				// Another client, and the same client on another promotion
				// or endpoint, have their own buckets.
				for _, req := range []*http.Request{claimReq("ip-promo", "198.51.100.2:1"), claimReq("ip-promo-2", "198.51.100.1:1")} {
					if rec := serve(h, req); rec.Code != 200 {
						t.Fatalf("%s from %s: %d", req.URL, req.RemoteAddr, rec.Code)
					}
				}
				if rec := serve(e.Wrap(KindJoin, promo, ok), claimReq("ip-promo", "198.51.100.1:1")); rec.Code != 200 {
					t.Fatalf("join is not limited but got %d", rec.Code)
				}
				if b.local {
					c.add(20 * time.Second)
					if rec := serve(h, claimReq("ip-promo", "198.51.100.1:1")); rec.Code != 200 {
						t.Fatalf("after 20 s: %d", rec.Code)
					}
				}
			})
			t.Run("IPv6 network", func(t *testing.T) {
				t.Parallel()
				e, err := New(b.cfg(RateLimitConfig{Claim: Limits{PerIP: Limit{Requests: 1, WindowSeconds: 60}}}), b.client)
				if err != nil {
					t.Fatal(err)
				}
				h := e.Wrap(KindClaim, promo, ok)
				if rec := serve(h, claimReq("v6-promo", "[2001:db8:1:2::1]:1")); rec.Code != 200 {
					t.Fatalf("first: %d", rec.Code)
				}
				if rec := serve(h, claimReq("v6-promo", "[2001:db8:1:2:ffff::9]:1")); rec.Code != 429 {
					t.Fatalf("same /64: %d, want 429", rec.Code)
				}
				if rec := serve(h, claimReq("v6-promo", "[2001:db8:1:3::1]:1")); rec.Code != 200 {
					t.Fatalf("another /64: %d", rec.Code)
				}
			})
			t.Run("per user from the token", func(t *testing.T) {
				t.Parallel()
				h, req := b.withTokens(t, "user-promo", Limits{
					PerUser: Limit{Requests: 2, WindowSeconds: 60},
					PerIP:   Limit{Requests: 100, WindowSeconds: 1},
				})
				for i := range 2 {
					if rec := serve(h, req("u-1", fmt.Sprintf("198.51.100.%d:1", i+1))); rec.Code != 200 {
						t.Fatalf("request %d: %d %s", i, rec.Code, rec.Body)
					}
				}
				if rec := serve(h, req("u-1", "198.51.100.9:1")); rec.Code != 429 {
					t.Fatalf("3rd request of u-1 from a new address: %d, want 429", rec.Code)
				}
				if rec := serve(h, req("u-2", "198.51.100.9:1")); rec.Code != 200 {
					t.Fatalf("u-2: %d", rec.Code)
				}
			})
			t.Run("a refused request spends nothing", func(t *testing.T) {
				t.Parallel()
				h, req := b.withTokens(t, "spend-promo", Limits{
					PerUser: Limit{Requests: 1, WindowSeconds: 60},
					PerIP:   Limit{Requests: 1, WindowSeconds: 60},
				})
				if rec := serve(h, req("u-1", "198.51.100.1:1")); rec.Code != 200 {
					t.Fatalf("first: %d", rec.Code)
				}
				// u-2 from the spent address is refused by the IP limit ...
				if rec := serve(h, req("u-2", "198.51.100.1:1")); rec.Code != 429 {
					t.Fatalf("u-2 from spent IP: %d, want 429", rec.Code)
				}
				// ... and so still has its own request left elsewhere.
				if rec := serve(h, req("u-2", "198.51.100.2:1")); rec.Code != 200 {
					t.Fatalf("u-2 from a fresh IP: %d", rec.Code)
				}
			})
			t.Run("LimitUser", func(t *testing.T) {
				t.Parallel()
				e, err := New(b.cfg(RateLimitConfig{Join: Limits{PerUser: Limit{Requests: 1, WindowSeconds: 60}}}), b.client)
				if err != nil {
					t.Fatal(err)
				}
				r := claimReq("lu-promo", "198.51.100.1:1")
				if rec := httptest.NewRecorder(); !e.LimitUser(rec, r, KindJoin, "lu-promo", "u-1") {
					t.Fatalf("first: refused %d", rec.Code)
				}
				rec := httptest.NewRecorder()
				if e.LimitUser(rec, r, KindJoin, "lu-promo", "u-1") || rec.Code != 429 || rec.Header().Get("Retry-After") == "" {
					t.Fatalf("second: %d %v", rec.Code, rec.Header())
				}
				if !e.LimitUser(httptest.NewRecorder(), r, KindClaim, "lu-promo", "u-1") {
					t.Fatal("claim has no per-user limit but was refused")
				}
				if !e.LimitUser(httptest.NewRecorder(), r, KindJoin, "lu-promo", "bad id!") {
					t.Fatal("a malformed user id is left to the handler, not limited")
				}
			})
			t.Run("malformed promotion id is not limited", func(t *testing.T) {
				t.Parallel()
				e, err := New(b.cfg(RateLimitConfig{Claim: Limits{PerIP: Limit{Requests: 1, WindowSeconds: 60}}}), b.client)
				if err != nil {
					t.Fatal(err)
				}
				h := e.Wrap(KindClaim, func(*http.Request) string { return "{bad}" }, ok)
				for range 3 {
					if rec := serve(h, claimReq("x", "198.51.100.1:1")); rec.Code != 200 {
						t.Fatalf("%d", rec.Code)
					}
				}
			})
		})
	}
}

// Keys live under the promotion's hash tag, so a Cluster takes both
// buckets of a request in one script; they expire once empty.
func TestRateLimitKeys(t *testing.T) {
	t.Parallel()
	client := redistest.ClusterClient(t)
	prefix := redistest.Prefix(t)
	e, err := New(Config{KeyPrefix: prefix, RateLimits: RateLimitConfig{Claim: Limits{
		PerIP:   Limit{Requests: 10, WindowSeconds: 10},
		PerUser: Limit{Requests: 10, WindowSeconds: 10},
	}}}, client)
	if err != nil {
		t.Fatal(err)
	}
	r := claimReq("keys-promo", "198.51.100.1:1")
	r = r.WithContext(context.WithValue(r.Context(), keyUser, "u-1"))
	if rec := serve(e.RateLimit(KindClaim, promo)(ok), r); rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	ctx := context.Background()
	for _, k := range []string{prefix + "{keys-promo}:edge:claim:ip:198.51.100.1", prefix + "{keys-promo}:edge:claim:user:u-1"} {
		pttl, err := client.Do(ctx, client.B().Pttl().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if pttl <= 0 || pttl > 1000 {
			t.Errorf("%s: PTTL %d, want 1..1000 ms (one interval of 1 s)", k, pttl)
		}
	}
}

// With Redis unreachable the limits fail open: the request goes on, one
// line is logged and the count of unlimited requests grows.
func TestRateLimitFailsOpen(t *testing.T) {
	t.Parallel()
	client, err := rueidis.NewClient(redistest.Topology{Addrs: []string{redistest.Single(t).Addr()}}.ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	client.Close()
	var buf syncBuffer
	e, err := New(Config{
		Logger:     slog.New(slog.NewTextHandler(&buf, nil)),
		RateLimits: RateLimitConfig{Claim: Limits{PerIP: Limit{Requests: 1, WindowSeconds: 60}}},
	}, client)
	if err != nil {
		t.Fatal(err)
	}
	h := e.Wrap(KindClaim, promo, ok)
	for range 3 {
		if rec := serve(h, claimReq("open-promo", "198.51.100.1:1")); rec.Code != 200 {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	if e.FailOpen() != 3 {
		t.Errorf("FailOpen %d, want 3", e.FailOpen())
	}
	if n := strings.Count(buf.String(), "rate limiter unavailable"); n != 1 {
		t.Errorf("%d log lines, want 1:\n%s", n, buf.String())
	}
}

// The local table never grows past its bound: empty buckets are swept, and
// a new client finding it full of live ones goes on unlimited.
func TestLocalLimiterBound(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := newLocalLimiter(2, c.now)
	r := func(k string) []rule {
		return []rule{{key: k, interval: int64(time.Second / time.Microsecond), burst: 1}}
	}
	ctx := context.Background()
	for _, k := range []string{"a", "b"} {
		if ok, _, _, err := l.allow(ctx, r(k)); !ok || err != nil {
			t.Fatalf("%s: %v %v", k, ok, err)
		}
	}
	if _, _, _, err := l.allow(ctx, r("c")); err != errLocalFull {
		t.Fatalf("c with a full table: %v, want errLocalFull", err)
	}
	c.add(time.Second)
	if ok, _, _, err := l.allow(ctx, r("c")); !ok || err != nil {
		t.Fatalf("c after a sweep: %v %v", ok, err)
	}
	if len(l.tats) != 1 {
		t.Fatalf("%d entries, want 1", len(l.tats))
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
