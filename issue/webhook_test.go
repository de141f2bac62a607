package issue_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

const testSecret = "0123456789abcdef-webhook"

// verify checks a Dibs-Signature header the way a partner would: recompute
// HMAC-SHA256 of "<t>.<body>" and compare in constant time.
func verify(header string, body []byte) bool {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	got, err := hex.DecodeString(sig)
	if err != nil || ts == "" {
		return false
	}
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// partner is a test coupon service: each path is scripted with the
// answers of its successive calls ("hang" waits until the caller gives
// up); once a script is used up, it answers like a well-behaved service:
// 200 with a code the first time a key is seen, 409 after. It counts the
// effects (codes made) per Idempotency-Key.
type partner struct {
	mu      sync.Mutex
	scripts map[string][]string
	calls   map[string]int
	keys    map[string]map[string]bool // path → keys seen
	effects map[string]int             // key → codes made
	bad     []string                   // problems seen in requests
}

func (p *partner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	p.mu.Lock()
	if !verify(r.Header.Get(issue.SignatureHeader), body) {
		p.bad = append(p.bad, "bad signature on "+r.URL.Path)
	}
	var c struct {
		Action  string `json:"action"`
		ClaimID string `json:"claim_id"`
	}
	err := json.Unmarshal(body, &c)
	want := c.ClaimID
	if c.Action == "revoke" {
		want += issue.RevokeIdempotencySuffix
	}
	if err != nil || want != key {
		p.bad = append(p.bad, fmt.Sprintf("body %s does not match key %q", body, key))
	}
	if p.keys[r.URL.Path] == nil {
		p.keys[r.URL.Path] = map[string]bool{}
	}
	p.keys[r.URL.Path][key] = true
	p.calls[r.URL.Path]++
	var step string
	if s := p.scripts[r.URL.Path]; len(s) > 0 {
		step, p.scripts[r.URL.Path] = s[0], s[1:]
	}
	done := p.effects[key] > 0
	if step == "" && !done {
		p.effects[key]++
	}
	p.mu.Unlock()
	switch {
	case step == "hang":
		<-r.Context().Done()
	case step == "429":
		w.Header().Set("Retry-After", "30")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	case step != "":
		code, _ := strconv.Atoi(step)
		http.Error(w, fmt.Sprintf("scripted %d for %s", code, key), code)
	case done:
		http.Error(w, "already issued", http.StatusConflict)
	default:
		fmt.Fprintf(w, `{"code":"P-%s"}`, key)
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time       { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) step(d time.Duration) { c.ns.Add(int64(d)) }
func newClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (p *partner) count(path string) int { p.mu.Lock(); defer p.mu.Unlock(); return p.calls[path] }
func (p *partner) effect(key string) int { p.mu.Lock(); defer p.mu.Unlock(); return p.effects[key] }
func (p *partner) keysOf(path string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k := range p.keys[path] {
		out = append(out, k)
	}
	return out
}

// TestWebhookOutcomes runs one claim per scripted path through the webhook
// issuer the way the pipeline does (a transient failure is retried later,
// a permanent one dead-letters) and checks each end state, that retries
// carried the same Idempotency-Key and a valid signature, and that no
// claim had two effects.
func TestWebhookOutcomes(t *testing.T) {
	t.Parallel()
	p := &partner{
		scripts: map[string][]string{
			"/timeout":  {"hang"},
			"/e500":     {"500", "502"},
			"/r429":     {"429"},
			"/conflict": {"409"},
			"/bad":      {"400"},
			"/down":     {"503", "503", "503", "503", "503", "503"},
		},
		calls: map[string]int{}, keys: map[string]map[string]bool{}, effects: map[string]int{},
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	clock := newClock()
	w, err := issue.NewWebhook(testSecret, issue.WebhookConfig{TimeoutMS: 200, BaseBackoffMS: 1000, MaxBackoffMS: 8000}, srv.Client(), clock.now)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

	type result struct {
		grant      issue.Grant
		err        error
		transients int
	}
	// run retries claim path's grant as the stream does: a transient
	// error pauses (the clock moves by a second), anything else ends it.
	run := func(path string) result {
		promo := store.Promotion{ID: "hooks", Kind: store.KindWebhook, Value: 700, WebhookURL: srv.URL + "/" + path}
		c := store.Issue{ClaimID: "hooks#" + path, PromotionID: "hooks", UserID: "u-" + path, Rank: 1, Slot: 1, AcceptedAt: at}
		var r result
		for range 200 {
			r.grant, r.err = w.Grant(t.Context(), promo, c)
			if !errors.Is(r.err, stream.ErrTransient) {
				return r
			}
			r.transients++
			clock.step(time.Second)
		}
		t.Fatalf("%s: still transient after 200 tries: %v", path, r.err)
		return r
	}

	for _, tc := range []struct {
		path      string
		permanent bool
		code      bool // the partner's code is stored
		minTrans  int
	}{
		{"ok", false, true, 0},
		{"timeout", false, true, 1},
		{"e500", false, true, 2},
		{"r429", false, true, 1},
		{"conflict", false, false, 0},
		{"bad", true, false, 0},
		// Six failures in a row pause at least 0.5+1+2+4+4+4 s (1 s doubling
		// to 8 s, jitter half to all): the retries a second apart meet the
		// pause far more often than they call.
		{"down", false, true, 12},
	} {
		r := run(tc.path)
		key := "hooks#" + tc.path
		switch {
		case tc.permanent:
			if !errors.Is(r.err, stream.ErrPermanent) || !strings.Contains(r.err.Error(), "400") || !strings.Contains(r.err.Error(), "scripted 400 for "+key) {
				t.Errorf("%s: err %v, want a permanent failure with the status and the answer", tc.path, r.err)
			}
		case r.err != nil:
			t.Errorf("%s: err %v, want issued", tc.path, r.err)
		case tc.code && r.grant.Code != "P-"+key:
			t.Errorf("%s: code %q, want the partner's", tc.path, r.grant.Code)
		case !tc.code && r.grant.Code != "":
			t.Errorf("%s: code %q, want none", tc.path, r.grant.Code)
		case r.grant.Value != 700:
			t.Errorf("%s: value %d, want 700", tc.path, r.grant.Value)
		}
		if r.transients < tc.minTrans {
			t.Errorf("%s: %d transient failures, want at least %d", tc.path, r.transients, tc.minTrans)
		}
		if keys := p.keysOf("/" + tc.path); len(keys) != 1 || keys[0] != key {
			t.Errorf("%s: keys %v, want only %s", tc.path, keys, key)
		}
		if n := p.effect(key); n > 1 {
			t.Errorf("%s: %d effects", tc.path, n)
		}
	}
	// Retry-After: 30 held the endpoint back: the 429 and the success are
	// the only calls, about 30 retries apart.
	if n := p.count("/r429"); n != 2 {
		t.Errorf("/r429 was called %d times, want 2 (no call before Retry-After)", n)
	}
	// The down endpoint was called once per failure and once more to
	// succeed, whatever the retries in between.
	if calls := p.count("/down"); calls != 7 {
		t.Errorf("/down was called %d times, want 7", calls)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bad) > 0 {
		t.Fatalf("the partner saw bad requests: %v", p.bad)
	}
}

// TestWebhookConcurrentRetries posts one claim from many goroutines at
// once, as redeliveries after a crash could: the partner sees one key and
// makes one effect.
func TestWebhookConcurrentRetries(t *testing.T) {
	t.Parallel()
	p := &partner{scripts: map[string][]string{}, calls: map[string]int{}, keys: map[string]map[string]bool{}, effects: map[string]int{}}
	srv := httptest.NewServer(p)
	defer srv.Close()
	w, err := issue.NewWebhook(testSecret, issue.WebhookConfig{}, srv.Client(), nil)
	if err != nil {
		t.Fatal(err)
	}
	promo := store.Promotion{ID: "c", Kind: store.KindWebhook, WebhookURL: srv.URL + "/x"}
	c := store.Issue{ClaimID: "c#1", PromotionID: "c", UserID: "u", Rank: 1, Slot: 1}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := w.Grant(t.Context(), promo, c); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := p.effect("c#1"); n != 1 {
		t.Fatalf("%d effects for one claim, want 1", n)
	}
}

func TestWebhookConfig(t *testing.T) {
	t.Parallel()
	if _, err := issue.NewWebhook("short", issue.WebhookConfig{}, nil, nil); err == nil {
		t.Error("a short secret was taken")
	}
	for _, cfg := range []issue.WebhookConfig{{TimeoutMS: -1}, {Concurrency: 65}, {BaseBackoffMS: 5000, MaxBackoffMS: 10}, {MaxBackoffMS: 700_000}} {
		if _, err := issue.NewWebhook(testSecret, cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "WebhookConfig.") {
			t.Errorf("NewWebhook(%+v) = %v, want an error naming the field", cfg, err)
		}
	}
	kinds, err := issue.Builtin(issue.Config{})
	if err != nil || kinds[store.KindWebhook] != nil {
		t.Fatalf("Builtin without a secret: %v, webhook issuer %v", err, kinds[store.KindWebhook])
	}
	kinds, err = issue.Builtin(issue.Config{WebhookSecret: testSecret})
	if err != nil || kinds[store.KindWebhook] == nil {
		t.Fatalf("Builtin with a secret: %v, no webhook issuer", err)
	}
	if err := (issue.Config{WebhookSecret: "short"}).Validate(); err == nil {
		t.Error("Validate took a short webhook secret")
	}
	for code, ok := range map[string]bool{"A": true, "ÄB-1": true, "": false, "a b": false, "a\x00": false, strings.Repeat("x", 65): false, "\xff": false} {
		if issue.ValidPoolCode(code) != ok {
			t.Errorf("ValidPoolCode(%q) = %v", code, !ok)
		}
	}
}

// TestWebhookRevoke posts revokes the way the revoke sweep does (an error
// is retried later, a second apart): 2xx, 404 and 409 are done; a 429, a
// 5xx and a timeout are transient and back the endpoint's revokes off; a
// refusal is permanent but backed off too, and never holds the
// endpoint's claims back. Each revoke carries its own key and has one
// effect at most.
func TestWebhookRevoke(t *testing.T) {
	t.Parallel()
	p := &partner{
		scripts: map[string][]string{
			"/gone":    {"404"},
			"/dup":     {"409"},
			"/down":    {"503", "503", "503"},
			"/timeout": {"hang"},
			"/bad":     {"400", "422"},
		},
		calls: map[string]int{}, keys: map[string]map[string]bool{}, effects: map[string]int{},
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	clock := newClock()
	w, err := issue.NewWebhook(testSecret, issue.WebhookConfig{TimeoutMS: 200, BaseBackoffMS: 1000, MaxBackoffMS: 4000}, srv.Client(), clock.now)
	if err != nil {
		t.Fatal(err)
	}
	var rv issue.Revoker = w
	at := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	revoke := func(path string) (errs []error) {
		promo := store.Promotion{ID: "rv", Kind: store.KindWebhook, WebhookURL: srv.URL + "/" + path}
		c := store.Issued{ClaimID: "rv#" + path, PromotionID: "rv", UserID: "u-" + path, Rank: 1, Slot: 1,
			IssuedAt: at, RevokedAt: at.Add(time.Hour), Grant: store.Grant{Code: "P-rv#" + path}}
		for range 100 {
			err := rv.Revoke(t.Context(), promo, c)
			if err == nil {
				return errs
			}
			errs = append(errs, err)
			clock.step(time.Second)
		}
		t.Fatalf("%s: still failing after 100 tries: %v", path, errs[len(errs)-1])
		return nil
	}
	for _, tc := range []struct {
		path      string
		calls     int  // calls the partner saw
		permanent bool // the first failure is a refusal
	}{
		{"ok", 1, false},
		{"gone", 1, false},
		{"dup", 1, false},
		{"down", 4, false},
		{"timeout", 2, false},
		{"bad", 3, true},
	} {
		errs := revoke(tc.path)
		key := "rv#" + tc.path + issue.RevokeIdempotencySuffix
		if n := p.count("/" + tc.path); n != tc.calls {
			t.Errorf("%s: %d calls, want %d (none while backing off)", tc.path, n, tc.calls)
		}
		if keys := p.keysOf("/" + tc.path); len(keys) != 1 || keys[0] != key {
			t.Errorf("%s: keys %v, want only %s", tc.path, keys, key)
		}
		if n := p.effect(key); n > 1 {
			t.Errorf("%s: %d effects", tc.path, n)
		}
		// Three failures in a row pause 2 s at least the third time.
		if tc.calls >= 4 && len(errs) <= tc.calls-1 {
			t.Errorf("%s: %d failed tries for %d failed calls: no backoff", tc.path, len(errs), tc.calls-1)
		}
		for i, err := range errs {
			if i == 0 && tc.permanent != errors.Is(err, stream.ErrPermanent) {
				t.Errorf("%s: first error %v, want permanent %v", tc.path, err, tc.permanent)
			}
			if !errors.Is(err, stream.ErrPermanent) && !errors.Is(err, stream.ErrTransient) {
				t.Errorf("%s: error %v is of no kind", tc.path, err)
			}
		}
	}

	// A refused revoke backs off the endpoint's revokes only: its claims
	// are still posted.
	p.mu.Lock()
	p.scripts["/mixed"] = []string{"400"}
	p.mu.Unlock()
	promo := store.Promotion{ID: "rv", Kind: store.KindWebhook, WebhookURL: srv.URL + "/mixed"}
	if err := rv.Revoke(t.Context(), promo, store.Issued{ClaimID: "rv#m1", PromotionID: "rv"}); !errors.Is(err, stream.ErrPermanent) {
		t.Fatalf("refused revoke: %v", err)
	}
	if err := rv.Revoke(t.Context(), promo, store.Issued{ClaimID: "rv#m1", PromotionID: "rv"}); !errors.Is(err, issue.ErrWebhookBackingOff) {
		t.Fatalf("revoke right after a refusal: %v, want backing off", err)
	}
	if _, err := w.Grant(t.Context(), promo, store.Issue{ClaimID: "rv#m2", PromotionID: "rv"}); err != nil {
		t.Fatalf("a claim of the endpoint after its revoke was refused: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bad) > 0 {
		t.Fatalf("the partner saw bad requests: %v", p.bad)
	}
}
