package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dibsio/dibs/internal/testkit/testmain"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/sqlite"
)

func TestMain(m *testing.M) { testmain.Main(m) }

const secret = "0123456789abcdef-secret"

// receiver is a deduplicating webhook subscriber: it checks each
// delivery's signature and processes each event id once. While down, it
// answers 503.
type receiver struct {
	t    *testing.T
	down atomic.Bool
	// retryAfter, if set, is sent with each 503.
	retryAfter string

	mu        sync.Mutex
	processed []Message      // in the order first received
	received  map[string]int // deliveries per event id
	refused   int
}

func newReceiver(t *testing.T) (*receiver, *httptest.Server) {
	r := &receiver{t: t, received: map[string]int{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	if err := Verify([]byte(secret), req.Header.Get(HeaderSignature), body, time.Now(), time.Minute); err != nil {
		r.t.Errorf("delivery with a bad signature: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down.Load() {
		r.refused++
		if r.retryAfter != "" {
			w.Header().Set("Retry-After", r.retryAfter)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	id := req.Header.Get(HeaderEventID)
	r.received[id]++
	if r.received[id] == 1 { // processed once, whatever the redeliveries
		var m Message
		if err := json.Unmarshal(body, &m); err != nil || m.ID != id || m.Type != req.Header.Get(HeaderEventType) {
			r.t.Errorf("delivery %s: body %s (%v)", id, body, err)
		}
		r.processed = append(r.processed, m)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) snapshot() (processed []Message, received map[string]int, refused int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.processed), maps(r.received), r.refused
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// openStore opens (and migrates) the SQLite database at path.
func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.New(t.Context(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// writeEvents issues n claims of promotion id, from rank from on: their
// claim.accepted and claim.issued events.
func writeEvents(t *testing.T, s store.Store, id string, from, n int64) {
	t.Helper()
	if err := issueClaims(t.Context(), s, id, from, n); err != nil {
		t.Fatal(err)
	}
}

func issueClaims(ctx context.Context, s store.Store, id string, from, n int64) error {
	b := make([]store.Issue, n)
	for i := range b {
		r := from + int64(i)
		b[i] = store.Issue{ClaimID: fmt.Sprintf("%s#%d", id, r), PromotionID: id, UserID: fmt.Sprintf("u%d", r),
			Rank: r, Slot: 1, AcceptedAt: time.Now()}
	}
	_, err := s.IssueBatch(ctx, b)
	return err
}

func fastConfig(s store.EventLog, owner string, subs ...Subscriber) Config {
	return Config{Store: s, Owner: owner, Subscribers: subs, Timeout: time.Second,
		PollInterval: 10 * time.Millisecond, LeaseTTL: 3 * time.Second,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
}

func start(t *testing.T, cfg Config) *Deliverer {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	return d
}

// checkAll fails unless every event of s reached r, each processed once,
// in seq order.
func checkAll(t *testing.T, s store.Store, r *receiver) {
	t.Helper()
	all, err := s.Events(t.Context(), 0, nil, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 30*time.Second, "every event delivered", func() bool {
		p, _, _ := r.snapshot()
		return len(p) >= len(all)
	})
	processed, received, _ := r.snapshot()
	if len(processed) != len(all) {
		t.Fatalf("processed %d events, want %d", len(processed), len(all))
	}
	for i, e := range all {
		if processed[i].ID != e.ID || processed[i].Seq != e.Seq {
			t.Fatalf("event %d processed is %s (seq %d), want %s (seq %d): not in feed order",
				i, processed[i].ID, processed[i].Seq, e.ID, e.Seq)
		}
		if received[e.ID] < 1 {
			t.Fatalf("event %s never received", e.ID)
		}
	}
}

func TestSignVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1"}`)
	at := time.Unix(1_800_000_000, 0)
	h := Sign([]byte(secret), at, body)
	if err := Verify([]byte(secret), h, body, at.Add(time.Second), time.Minute); err != nil {
		t.Fatalf("Verify(Sign) = %v", err)
	}
	for _, c := range []struct {
		name, header string
		body         []byte
		key          string
		now          time.Time
		want         error
	}{
		{"other body", h, []byte(`{"id":"evt_2"}`), secret, at, ErrBadSignature},
		{"other secret", h, body, secret + "x", at, ErrBadSignature},
		{"stale", h, body, secret, at.Add(time.Hour), ErrStale},
		{"no v1", "t=1800000000", body, secret, at, ErrBadSignature},
		{"garbage", "nonsense", body, secret, at, ErrBadSignature},
		{"bad t", "t=x,v1=00", body, secret, at, ErrBadSignature},
	} {
		if err := Verify([]byte(c.key), c.header, c.body, c.now, time.Minute); !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
	// A second v1 (a rotation) passes if one matches.
	two := h + ",v1=" + Sign([]byte("another-secret-0000"), at, body)[len("t=1800000000,v1="):]
	if err := Verify([]byte("another-secret-0000"), two, body, at, time.Minute); err != nil {
		t.Fatalf("rotated: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	s := openStore(t, filepath.Join(t.TempDir(), "v.db"))
	good := Subscriber{Name: "crm", URL: "https://crm.example/hooks", Secret: secret}
	for _, c := range []struct {
		name string
		mod  func(*Config)
	}{
		{"no store", func(c *Config) { c.Store = nil }},
		{"no owner", func(c *Config) { c.Owner = "" }},
		{"bad url", func(c *Config) { c.Subscribers[0].URL = "ftp://x" }},
		{"short secret", func(c *Config) { c.Subscribers[0].Secret = "short" }},
		{"unknown type", func(c *Config) { c.Subscribers[0].Types = []string{"claim.made"} }},
		{"twice", func(c *Config) { c.Subscribers = append(c.Subscribers, good) }},
		{"timeout", func(c *Config) { c.Timeout = time.Minute }},
	} {
		cfg := Config{Store: s, Owner: "a", Subscribers: []Subscriber{good}}
		c.mod(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted it", c.name)
		}
	}
	if _, err := New(Config{Store: s, Owner: "a", Subscribers: []Subscriber{good}}); err != nil {
		t.Fatal(err)
	}
}

// TestCatchUp: a subscriber that is down (503) for a while misses nothing
// once it is back, and holds back no other subscriber meanwhile.
func TestCatchUp(t *testing.T) {
	t.Parallel()
	s := openStore(t, filepath.Join(t.TempDir(), "c.db"))
	down, downSrv := newReceiver(t)
	down.down.Store(true)
	down.retryAfter = "0"
	up, upSrv := newReceiver(t)
	reg := prometheus.NewRegistry()
	cfg := fastConfig(s, "a",
		Subscriber{Name: "down", URL: downSrv.URL, Secret: secret},
		Subscriber{Name: "up", URL: upSrv.URL, Secret: secret})
	cfg.Metrics = NewMetrics(reg)
	start(t, cfg)

	writeEvents(t, s, "p1", 1, 20)
	checkAll(t, s, up) // the other subscriber is not held back
	wait.For(t, 30*time.Second, "failed deliveries retried with backoff", func() bool {
		_, _, refused := down.snapshot()
		return refused >= 5
	})
	writeEvents(t, s, "p1", 21, 20) // written while it is down
	if lag := value(cfg.Metrics.lag.WithLabelValues("down")); lag == 0 {
		wait.For(t, 30*time.Second, "the lag measured", func() bool {
			return value(cfg.Metrics.lag.WithLabelValues("down")) > 0
		})
	}
	down.down.Store(false)
	checkAll(t, s, down)
	checkAll(t, s, up)
	if f := value(cfg.Metrics.failed.WithLabelValues("down")); f < 5 {
		t.Errorf("failures counted %v, want at least 5", f)
	}
	wait.For(t, 30*time.Second, "the delivered count and a zero lag", func() bool {
		return value(cfg.Metrics.delivered.WithLabelValues("down")) == 80 &&
			value(cfg.Metrics.lag.WithLabelValues("down")) == 0
	})
}

// TestTypes: a subscriber gets only the types it asked for.
func TestTypes(t *testing.T) {
	t.Parallel()
	s := openStore(t, filepath.Join(t.TempDir(), "t.db"))
	r, srv := newReceiver(t)
	start(t, fastConfig(s, "a", Subscriber{Name: "issued", URL: srv.URL, Secret: secret,
		Types: []string{store.EventClaimIssued}}))
	writeEvents(t, s, "p", 1, 10)
	wait.For(t, 30*time.Second, "the issued events", func() bool {
		p, _, _ := r.snapshot()
		return len(p) == 10
	})
	p, _, _ := r.snapshot()
	for _, m := range p {
		if m.Type != store.EventClaimIssued {
			t.Fatalf("got a %s event", m.Type)
		}
	}
}

// TestTakeover: two instances deliver for one subscriber from one
// database; the one delivering is killed (its database connection gone,
// its lease not released). The other takes over once the lease runs out:
// every event reaches the subscriber at least once, and each is processed
// once.
func TestTakeover(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "k.db")
	writer := openStore(t, path)
	r, srv := newReceiver(t)
	sub := Subscriber{Name: "crm", URL: srv.URL, Secret: secret}
	stA, stB := openStore(t, path), openStore(t, path)
	mA, mB := NewMetrics(prometheus.NewRegistry()), NewMetrics(prometheus.NewRegistry())
	cfgA, cfgB := fastConfig(stA, "a", sub), fastConfig(stB, "b", sub)
	cfgA.Metrics, cfgB.Metrics = mA, mB
	cfgA.LeaseTTL, cfgB.LeaseTTL = 2*time.Second, 2*time.Second
	a := start(t, cfgA)
	wait.For(t, 30*time.Second, "a delivering", func() bool {
		return value(mA.leader.WithLabelValues("crm")) == 1
	})
	start(t, cfgB)

	// Events keep coming while a delivers and is killed.
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for n := int64(0); ctx.Err() == nil && n < 200; n++ {
			if err := issueClaims(ctx, writer, "p", 1+n*5, 5); err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
		}
	})
	wait.For(t, 30*time.Second, "some events delivered", func() bool {
		p, _, _ := r.snapshot()
		return len(p) >= 50
	})
	// Killed: its database is gone under it, so it can neither move its
	// cursor nor release its lease; then it stops.
	_ = stA.Close()
	_ = a.Stop(context.Background())
	wait.For(t, 30*time.Second, "b taking over", func() bool {
		return value(mB.leader.WithLabelValues("crm")) == 1
	})
	cancel()
	wg.Wait()
	checkAll(t, writer, r)
	_, received, _ := r.snapshot()
	again := 0
	for _, n := range received {
		if n > 1 {
			again++
		}
	}
	t.Logf("%d events delivered, %d of them more than once (processed once)", len(received), again)
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	lo, hi := 100*time.Millisecond, time.Second
	for n := 1; n < 40; n++ {
		d := backoff(lo, hi, n)
		top := min(lo<<min(n-1, 20), hi)
		if d < top/2 || d > top {
			t.Fatalf("backoff(%d) = %s, want within [%s, %s]", n, d, top/2, top)
		}
	}
	now := time.Now()
	for v, want := range map[string]time.Duration{"": 0, "3": 3 * time.Second, "x": 0, "-1": 0,
		now.Add(time.Minute).UTC().Format(http.TimeFormat): time.Minute} {
		if got := retryAfter(v, now); got < want-time.Second || got > want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

// value reads a counter's or gauge's value.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}
