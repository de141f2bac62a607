package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/httpapi/ui"
	"github.com/dibsio/dibs/internal/testkit/pgtest"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	_ "github.com/dibsio/dibs/store/postgres"
	_ "github.com/dibsio/dibs/store/sqlite"
	"github.com/dibsio/dibs/stream"
	"github.com/dibsio/dibs/waitroom"
)

func TestMain(m *testing.M) { redistest.Main(m) }

const token = "test-admin-token"

// env is one running API over real Redis and a real database.
type env struct {
	url    string
	client rueidis.Client
	store  store.Store
	mgr    *promotion.Manager
	prefix string
	api    *httpapi.Server
}

// backend names a Redis topology and a database.
type backend struct {
	redis string // single | cluster
	db    string // sqlite | postgres
}

func (b backend) String() string { return b.redis + "+" + b.db }

// backends covers each Redis topology and each database at least once.
var backends = []backend{{"single", "sqlite"}, {"cluster", "postgres"}}

func eachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t, b))
		})
	}
}

func openStore(t *testing.T, db string) store.Store {
	t.Helper()
	ctx := context.Background()
	url := "sqlite://" + filepath.Join(t.TempDir(), "dibs.db")
	if db == "postgres" {
		url = pgtest.URL(t)
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return st
}

func testStreamConfig() stream.Config {
	sc := stream.DefaultConfig()
	sc.Block = 200 * time.Millisecond
	sc.PollInterval = 20 * time.Millisecond
	sc.ReclaimMinIdle = 2 * time.Second
	sc.HandlerTimeout = 800 * time.Millisecond
	sc.Logger = slog.New(slog.DiscardHandler)
	return sc
}

func setup(t *testing.T, b backend) *env {
	t.Helper()
	return setupWith(t, b, nil)
}

// setupWith is setup with the API's Config adjusted by tune (if not nil).
func setupWith(t *testing.T, b backend, tune func(*httpapi.Config)) *env {
	t.Helper()
	return setupInstance(t, b, instanceTuning{api: tune})
}

// instanceTuning adjusts the configurations of a test instance: its API's
// and its manager's (each if not nil).
type instanceTuning struct {
	api     func(*httpapi.Config)
	manager func(*promotion.Config)
}

// webhookSecret signs the webhook calls of instances set up withWebhooks.
const webhookSecret = "httpapi-test-webhook-secret-0123456789"

// withWebhooks gives a test instance's manager the built-in issuers with a
// webhook secret, so it takes webhook promotions.
func withWebhooks(t *testing.T) instanceTuning {
	t.Helper()
	kinds, err := issue.Builtin(issue.Config{WebhookSecret: webhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	return instanceTuning{manager: func(c *promotion.Config) { c.Issuers = kinds }}
}

// setupInstance is setup with the instance's configurations adjusted by tn.
func setupInstance(t *testing.T, b backend, tn instanceTuning) *env {
	t.Helper()
	var client rueidis.Client
	for _, tp := range redistest.Topologies(t) {
		if tp.Name == b.redis {
			client = tp.Client(t)
		}
	}
	if client == nil {
		t.Fatalf("no topology %q", b.redis)
	}
	st := openStore(t, b.db)
	prefix := redistest.Prefix(t)
	rooms, err := waitroom.New(client, waitroom.Config{Prefix: prefix, Keys: testRoomKeys, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mgr, api, url := startInstance(t, client, st, prefix, rooms, tn)
	return &env{url: url, client: client, store: st, mgr: mgr, prefix: prefix, api: api}
}

// startInstance starts a dibs instance (its manager and API, their
// configurations adjusted by tn) on client, st and prefix, stopped when the
// test ends, and returns them and the API's base URL.
func startInstance(t *testing.T, client rueidis.Client, st store.Store, prefix string, rooms *waitroom.Rooms,
	tn instanceTuning) (*promotion.Manager, *httpapi.Server, string) {
	t.Helper()
	mcfg := promotion.Config{
		Rooms:           rooms,
		Prefix:          prefix,
		Stream:          testStreamConfig(),
		RecheckInterval: 100 * time.Millisecond,
		Logger:          slog.New(slog.DiscardHandler),
	}
	if tn.manager != nil {
		tn.manager(&mcfg)
	}
	tally := new(ui.Tally)
	onIssued := mcfg.OnIssued
	mcfg.OnIssued = func(id string, n int) {
		tally.Issued(id, n)
		if onIssued != nil {
			onIssued(id, n)
		}
	}
	mgr, err := promotion.New(client, st, mcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := httpapi.Config{Manager: mgr, AdminToken: token, Redis: client, KeyPrefix: prefix, Logger: slog.New(slog.DiscardHandler),
		Tally: tally}
	if tn.api != nil {
		tn.api(&cfg)
	}
	api, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api.Start()
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := api.Stop(ctx); err != nil {
			t.Errorf("stop the dashboard's sampling: %v", err)
		}
		if err := mgr.Stop(ctx); err != nil {
			t.Errorf("stop manager: %v", err)
		}
	})
	return mgr, api, srv.URL
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r response) code() string { s, _ := r.body["code"].(string); return s }

func (e *env) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := response{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

func (e *env) admin(t *testing.T, method, path, body string) response {
	t.Helper()
	return e.do(t, method, path, body, "Authorization", "Bearer "+token)
}

func (e *env) create(t *testing.T, body string) response {
	t.Helper()
	r := e.admin(t, "POST", "/v1/promotions", body)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	return r
}

func (e *env) claim(t *testing.T, promo, user string, headers ...string) response {
	t.Helper()
	return e.do(t, "POST", "/v1/promotions/"+promo+"/claims", fmt.Sprintf(`{"user_id":%q}`, user), headers...)
}

func (e *env) counts(t *testing.T, promo string) map[string]any {
	t.Helper()
	r := e.do(t, "GET", "/v1/promotions/"+promo, "")
	if r.status != http.StatusOK {
		t.Fatalf("get promotion: %d %s", r.status, r.raw)
	}
	return r.body["counts"].(map[string]any)
}

// waitIssued waits until the promotion's issued count reaches want.
func (e *env) waitIssued(t *testing.T, promo string, want float64) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c := e.counts(t, promo)
		if c["issued"].(float64) >= want && c["pending"].(float64) == 0 {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("issued never reached %v: %v", want, c)
		}
		<-tick.C
	}
}

// waitUserStatus waits until the user's claim status reads want. The
// database count of issued rows can run a moment ahead of the status in
// Redis: the row commits before its acknowledgement marks the claim issued.
func (e *env) waitUserStatus(t *testing.T, promo, user, want string) response {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		r := e.do(t, "GET", "/v1/promotions/"+promo+"/claims/"+user, "")
		if r.status == 200 && r.body["status"] == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's status in %s never became %s: %s", user, promo, want, r.raw)
		}
		<-tick.C
	}
}

// TestSeedScenario is the seed scenario end to end through the HTTP API: 1,000
// stock, 2,000 users in 10 waves of 200 concurrent claims.
func TestSeedScenario(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.create(t, `{"id":"seed","stock":1000}`)
		var (
			mu     sync.Mutex
			ranks  = map[float64]bool{}
			byCode = map[string]int{}
		)
		for wave := 0; wave < 10; wave++ {
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := 0; i < 200; i++ {
				user := fmt.Sprintf("u%d-%d", wave, i)
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r := e.claim(t, "seed", user)
					mu.Lock()
					defer mu.Unlock()
					switch r.status {
					case http.StatusAccepted:
						rank := r.body["rank"].(float64)
						if ranks[rank] {
							t.Errorf("rank %v twice", rank)
						}
						ranks[rank] = true
						byCode["accepted"]++
					default:
						byCode[r.code()]++
					}
				}()
			}
			close(start)
			wg.Wait()
		}
		if byCode["accepted"] != 1000 || byCode["sold_out"] != 1000 || len(byCode) != 2 {
			t.Fatalf("outcomes %v", byCode)
		}
		for r := 1; r <= 1000; r++ {
			if !ranks[float64(r)] {
				t.Fatalf("rank %d missing", r)
			}
		}
		c := e.waitIssued(t, "seed", 1000)
		if c["accepted"].(float64) != 1000 || c["issued"].(float64) != 1000 || c["remaining"].(float64) != 0 {
			t.Fatalf("counts %v", c)
		}
		r := e.do(t, "GET", "/v1/promotions/seed", "")
		if r.body["state"] != "sold_out" {
			t.Fatalf("state %v", r.body["state"])
		}
		u := e.do(t, "GET", "/v1/promotions/seed/claims/u0-0", "")
		if u.status != 200 {
			t.Fatalf("claim status %d %s", u.status, u.raw)
		}
	})
}

// TestOneUserManyClaims fires 50 concurrent claims of one user.
func TestOneUserManyClaims(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		for _, limit := range []int{1, 3} {
			id := fmt.Sprintf("limit%d", limit)
			e.create(t, fmt.Sprintf(`{"id":%q,"stock":100,"per_user_limit":%d}`, id, limit))
			var wg sync.WaitGroup
			var mu sync.Mutex
			codes := map[int]int{}
			for i := 0; i < 50; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := e.claim(t, id, "greedy")
					mu.Lock()
					codes[r.status]++
					mu.Unlock()
					if r.status != 202 && r.code() != "already_claimed" {
						t.Errorf("unexpected %d %s", r.status, r.raw)
					}
				}()
			}
			wg.Wait()
			if codes[202] != limit || codes[409] != 50-limit {
				t.Fatalf("limit %d: %v", limit, codes)
			}
			e.waitIssued(t, id, float64(limit))
			u := e.waitUserStatus(t, id, "greedy", "issued")
			claims := u.body["claims"].([]any)
			if u.body["status"] != "issued" || len(claims) != limit {
				t.Fatalf("user status %s", u.raw)
			}
			for _, c := range claims {
				if c.(map[string]any)["issued_at"] == nil {
					t.Fatalf("issued claim without issued_at: %s", u.raw)
				}
			}
		}
	})
}

func TestWindowAndClose(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		e.create(t, `{"id":"later","stock":5,"starts_at":"`+future+`"}`)
		r := e.claim(t, "later", "u1")
		if r.status != 403 || r.code() != "not_started" {
			t.Fatalf("before start: %d %s", r.status, r.raw)
		}
		if s := e.do(t, "GET", "/v1/promotions/later", "").body["state"]; s != "scheduled" {
			t.Fatalf("state %v", s)
		}
		e.create(t, `{"id":"now","stock":5}`)
		if r := e.claim(t, "now", "u1"); r.status != 202 {
			t.Fatalf("claim: %d %s", r.status, r.raw)
		}
		if r := e.do(t, "POST", "/v1/promotions/now/close", ""); r.status != 401 || r.code() != "unauthorized" {
			t.Fatalf("close without token: %d %s", r.status, r.raw)
		}
		r = e.admin(t, "POST", "/v1/promotions/now/close", "")
		if r.status != 200 || r.body["state"] != "ended" {
			t.Fatalf("close: %d %s", r.status, r.raw)
		}
		r = e.claim(t, "now", "u2")
		if r.status != 403 || r.code() != "ended" {
			t.Fatalf("after close: %d %s", r.status, r.raw)
		}
		e.waitIssued(t, "now", 1)
	})
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.create(t, `{"id":"idem","stock":1}`)
		first := e.claim(t, "idem", "alice", "Idempotency-Key", "k-1")
		if first.status != 202 {
			t.Fatalf("first: %d %s", first.status, first.raw)
		}
		again := e.claim(t, "idem", "alice", "Idempotency-Key", "k-1")
		if again.status != 202 || again.body["claim_id"] != first.body["claim_id"] || again.body["rank"] != first.body["rank"] {
			t.Fatalf("retry: %d %s vs %s", again.status, again.raw, first.raw)
		}
		if r := e.claim(t, "idem", "alice", "Idempotency-Key", "k-2"); r.code() != "already_claimed" {
			t.Fatalf("other key: %s", r.raw)
		}
		if r := e.claim(t, "idem", "bob"); r.status != 410 || r.code() != "sold_out" {
			t.Fatalf("bob: %d %s", r.status, r.raw)
		}
		c := e.waitIssued(t, "idem", 1)
		if c["accepted"].(float64) != 1 {
			t.Fatalf("counts %v", c)
		}
	})
}

// TestBadInput sends malformed requests; each gets its status and code, and
// the promotion's counts stay as they were.
func TestBadInput(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.create(t, `{"id":"target","stock":10}`)
		if r := e.claim(t, "target", "first"); r.status != 202 {
			t.Fatalf("claim: %s", r.raw)
		}
		before := e.waitIssued(t, "target", 1)
		auth := []string{"Authorization", "Bearer " + token}
		huge := `{"user_id":"` + strings.Repeat("x", 70<<10) + `"}`
		cases := []struct {
			name, method, path, body string
			headers                  []string
			status                   int
			code                     string
		}{
			{"malformed json", "POST", "/v1/promotions/target/claims", `{"user_id":`, nil, 400, "invalid_request"},
			{"not json", "POST", "/v1/promotions/target/claims", `user=1`, nil, 400, "invalid_request"},
			{"empty body", "POST", "/v1/promotions/target/claims", ``, nil, 400, "invalid_request"},
			{"unknown field", "POST", "/v1/promotions/target/claims", `{"user_id":"u9","x":1}`, nil, 400, "invalid_request"},
			{"trailing data", "POST", "/v1/promotions/target/claims", `{"user_id":"u9"} {}`, nil, 400, "invalid_request"},
			{"missing user", "POST", "/v1/promotions/target/claims", `{}`, nil, 400, "invalid_request"},
			{"bad user id", "POST", "/v1/promotions/target/claims", `{"user_id":"-bad"}`, nil, 400, "invalid_request"},
			{"user id too long", "POST", "/v1/promotions/target/claims", `{"user_id":"` + strings.Repeat("a", 65) + `"}`, nil, 400, "invalid_request"},
			{"user id wrong type", "POST", "/v1/promotions/target/claims", `{"user_id":17}`, nil, 400, "invalid_request"},
			{"huge body", "POST", "/v1/promotions/target/claims", huge, nil, 413, "too_large"},
			{"bad idempotency key", "POST", "/v1/promotions/target/claims", `{"user_id":"u9"}`, []string{"Idempotency-Key", strings.Repeat("k", 65)}, 400, "invalid_request"},
			{"bad promotion id", "POST", "/v1/promotions/bad$id/claims", `{"user_id":"u9"}`, nil, 400, "invalid_request"},
			{"unknown promotion", "POST", "/v1/promotions/nope/claims", `{"user_id":"u9"}`, nil, 404, "not_found"},
			{"wrong method", "DELETE", "/v1/promotions/target/claims", ``, nil, 405, "method_not_allowed"},
			{"create without token", "POST", "/v1/promotions", `{"stock":1}`, nil, 401, "unauthorized"},
			{"create wrong token", "POST", "/v1/promotions", `{"stock":1}`, []string{"Authorization", "Bearer nope"}, 401, "unauthorized"},
			{"stock zero", "POST", "/v1/promotions", `{"stock":0}`, auth, 400, "invalid_request"},
			{"stock negative", "POST", "/v1/promotions", `{"stock":-5}`, auth, 400, "invalid_request"},
			{"stock too big", "POST", "/v1/promotions", `{"stock":1000000001}`, auth, 400, "invalid_request"},
			{"stock missing", "POST", "/v1/promotions", `{"name":"x"}`, auth, 400, "invalid_request"},
			{"stock fraction", "POST", "/v1/promotions", `{"stock":1.5}`, auth, 400, "invalid_request"},
			{"expected rate negative", "POST", "/v1/promotions", `{"stock":1,"expected_claims_per_second":-1}`, auth, 400, "invalid_request"},
			{"expected rate too big", "POST", "/v1/promotions", `{"stock":1,"expected_claims_per_second":10000001}`, auth, 400, "invalid_request"},
			{"expected rate fraction", "POST", "/v1/promotions", `{"stock":1,"expected_claims_per_second":0.5}`, auth, 400, "invalid_request"},
			{"segments zero", "POST", "/v1/promotions", `{"stock":1,"segments":0}`, auth, 400, "invalid_request"},
			{"segments too many", "POST", "/v1/promotions", `{"stock":1,"segments":65}`, auth, 400, "invalid_request"},
			{"segments with a waiting room", "POST", "/v1/promotions", `{"stock":10,"segments":2,"waiting_room":{"enabled":true}}`, auth, 400, "invalid_request"},
			{"segments on a grant", "POST", "/v1/promotions", `{"mode":"grant","segments":2}`, auth, 400, "invalid_request"},
			{"bad date", "POST", "/v1/promotions", `{"stock":1,"starts_at":"tomorrow"}`, auth, 400, "invalid_request"},
			{"end before start", "POST", "/v1/promotions", `{"stock":1,"starts_at":"2026-11-21T00:00:00Z","ends_at":"2026-11-20T00:00:00Z"}`, auth, 400, "invalid_request"},
			{"bad mode", "POST", "/v1/promotions", `{"stock":1,"mode":"lottery"}`, auth, 400, "invalid_request"},
			{"bad limit", "POST", "/v1/promotions", `{"stock":1,"per_user_limit":1001}`, auth, 400, "invalid_request"},
			{"duplicate id", "POST", "/v1/promotions", `{"id":"target","stock":1}`, auth, 409, "already_exists"},
			{"bad list limit", "GET", "/v1/promotions?limit=0", ``, nil, 400, "invalid_request"},
			{"bad cursor", "GET", "/v1/promotions?cursor=!!", ``, nil, 400, "invalid_request"},
			{"grant on first_come", "POST", "/v1/promotions/target/grants", `{"user_ids":["a"]}`, auth, 400, "invalid_request"},
			{"join a queue that does not exist", "POST", "/v1/promotions/target/queue", `{"user_id":"u9"}`, nil, 404, "not_found"},
			{"queue place of a user", "GET", "/v1/promotions/target/queue/u9", ``, nil, 404, "not_found"},
			{"queue of an unknown promotion", "GET", "/v1/promotions/nope/queue/u9", ``, nil, 404, "not_found"},
			{"queue with a bad user id", "GET", "/v1/promotions/target/queue/-u", ``, nil, 400, "invalid_request"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := e.do(t, c.method, c.path, c.body, c.headers...)
				if r.status != c.status || r.code() != c.code {
					t.Fatalf("got %d %q, want %d %q: %s", r.status, r.code(), c.status, c.code, r.raw)
				}
				if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
					t.Fatalf("content type %q", ct)
				}
			})
		}
		after := e.counts(t, "target")
		for _, k := range []string{"accepted", "issued", "pending", "remaining"} {
			if before[k] != after[k] {
				t.Fatalf("counts changed: %v -> %v", before, after)
			}
		}
		list := e.do(t, "GET", "/v1/promotions", "")
		if n := len(list.body["promotions"].([]any)); n != 1 {
			t.Fatalf("bad input created promotions: %s", list.raw)
		}
	})
}

func TestListPagination(t *testing.T) {
	t.Parallel()
	e := setup(t, backends[0])
	for i := 0; i < 5; i++ {
		e.create(t, fmt.Sprintf(`{"id":"p%d","stock":1}`, i))
	}
	var seen []string
	path := "/v1/promotions?limit=2"
	for pages := 0; pages < 10; pages++ {
		r := e.do(t, "GET", path, "")
		for _, p := range r.body["promotions"].([]any) {
			seen = append(seen, p.(map[string]any)["id"].(string))
		}
		next, _ := r.body["next_cursor"].(string)
		if next == "" {
			break
		}
		path = "/v1/promotions?limit=2&cursor=" + next
	}
	if strings.Join(seen, ",") != "p0,p1,p2,p3,p4" {
		t.Fatalf("pages gave %v", seen)
	}
}

func TestGrants(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.create(t, `{"id":"gift","mode":"grant","kind":"point","value":100}`)
		r := e.admin(t, "POST", "/v1/promotions/gift/grants", `{"user_ids":["a","b","c"]}`)
		if r.status != 202 || r.body["enqueued"].(float64) != 3 {
			t.Fatalf("grant: %d %s", r.status, r.raw)
		}
		// All or nothing: one bad id enqueues nothing.
		r = e.admin(t, "POST", "/v1/promotions/gift/grants", `{"user_ids":["d","-bad"]}`)
		if r.status != 400 || r.code() != "invalid_request" {
			t.Fatalf("bad grant: %d %s", r.status, r.raw)
		}
		var nd bytes.Buffer
		nd.WriteString(`{"user_id":"c"}` + "\n")              // duplicate
		nd.WriteString(`{"user_id":"d"}` + "\n")              // new
		nd.WriteString(`not json` + "\n")                     // line 3 rejected
		nd.WriteString("\n")                                  // blank, ignored
		nd.WriteString(`{"user_id":"e","extra":true}` + "\n") // line 5 rejected
		nd.WriteString(`{"user_id":"f"}`)                     // last line without newline
		req, _ := http.NewRequest("POST", e.url+"/v1/promotions/gift/grants", &nd)
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Enqueued, Duplicates, Rejected int
			Errors                         []struct{ Line int }
		}
		_ = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if res.StatusCode != 202 || out.Enqueued != 2 || out.Duplicates != 1 || out.Rejected != 2 ||
			len(out.Errors) != 2 || out.Errors[0].Line != 3 || out.Errors[1].Line != 5 {
			t.Fatalf("ndjson: %d %+v", res.StatusCode, out)
		}
		c := e.waitIssued(t, "gift", 5)
		if c["remaining"] != nil || c["accepted"].(float64) != 5 {
			t.Fatalf("grant counts %v", c)
		}
		u := e.waitUserStatus(t, "gift", "d", "issued")
		if u.body["status"] != "issued" {
			t.Fatalf("grant status %s", u.raw)
		}
	})
}

func TestOperationalEndpoints(t *testing.T) {
	t.Parallel()
	e := setup(t, backends[0])
	if r := e.do(t, "GET", "/healthz", ""); r.status != 200 {
		t.Fatalf("healthz %d", r.status)
	}
	if r := e.do(t, "GET", "/readyz", ""); r.status != 200 {
		t.Fatalf("readyz %d %s", r.status, r.raw)
	}
	e.create(t, `{"id":"m","stock":1}`)
	e.claim(t, "m", "u1")
	e.claim(t, "m", "u2")
	r := e.do(t, "GET", "/metrics", "")
	for _, want := range []string{`dibs_claims_total{outcome="accepted"} 1`, `dibs_claims_total{outcome="sold_out"} 1`, "dibs_claim_duration_seconds_bucket"} {
		if !strings.Contains(r.raw, want) {
			t.Fatalf("metrics lack %q:\n%s", want, r.raw)
		}
	}
	if r := e.do(t, "GET", "/nowhere", ""); r.status != 404 || r.code() != "not_found" {
		t.Fatalf("unknown path %d %s", r.status, r.raw)
	}
}

// TestBearerScheme: the auth scheme is case-insensitive; the token is not.
func TestBearerScheme(t *testing.T) {
	t.Parallel()
	e := setup(t, backends[0])
	for _, c := range []struct {
		header string
		status int
	}{
		{"bearer " + token, 201},
		{"BEARER " + token, 201},
		{"Bearer " + strings.ToUpper(token), 401},
		{"Basic " + token, 401},
		{token, 401},
	} {
		r := e.do(t, "POST", "/v1/promotions", `{"stock":1}`, "Authorization", c.header)
		if r.status != c.status {
			t.Errorf("%q: %d %s", c.header, r.status, r.raw)
		}
	}
}

// TestContentTypeIsNotRequired: a JSON body is accepted whatever its
// Content-Type says (curl -d labels it as a form).
func TestContentTypeIsNotRequired(t *testing.T) {
	t.Parallel()
	e := setup(t, backends[0])
	for _, ct := range []string{"application/x-www-form-urlencoded", "text/plain", ""} {
		id := fmt.Sprintf("ct%d", len(ct))
		r := e.do(t, "POST", "/v1/promotions", `{"id":"`+id+`","stock":1}`, "Authorization", "Bearer "+token, "Content-Type", ct)
		if r.status != 201 {
			t.Fatalf("create with Content-Type %q: %d %s", ct, r.status, r.raw)
		}
		if r := e.claim(t, id, "u1", "Content-Type", ct); r.status != 202 {
			t.Fatalf("claim with Content-Type %q: %d %s", ct, r.status, r.raw)
		}
	}
}
