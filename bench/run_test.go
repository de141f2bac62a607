package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedServer answers the parts of the HTTP API the bench uses, from
// memory, and can be told to break an invariant on purpose. A correct dibs
// server never lets the checks fail, so this is how the tests show that each
// check catches what it is meant to catch. The real server is exercised by
// the end-to-end tests of `dibs demo` and `dibs bench` in cmd/dibs.
type scriptedServer struct {
	token string
	// Misbehaviour, set before the server starts.
	ignoreStock    bool // accept past the stock (oversell)
	ignoreLimit    bool // accept a user past the per-user limit
	repeatRank     int64
	issuePerPoll   int64 // accepted claims confirmed per read of the promotion; 0 confirms all at once
	neverIssue     bool
	lieAboutStatus bool // the claim status endpoint says "none" for everyone
	failEvery      int  // answer every n-th claim with a 500 and no problem body
	// waveSize, when set, holds each claim until waveSize claims are in
	// flight together, and records a violation when a claim of wave k
	// arrives before every claim of wave k-1 was answered.
	waveSize int

	mu        sync.Mutex
	promos    map[string]*scriptedPromo
	claims    int // claims received
	answered  int // claims answered
	violation string
	gate      chan struct{}
	waiting   int
}

type scriptedPromo struct {
	stock, limit int
	seq          int64
	issued       int64
	users        map[string][]int64
}

func newScriptedServer(t *testing.T, s *scriptedServer) *httptest.Server {
	t.Helper()
	s.token = "secret"
	s.promos = map[string]*scriptedPromo{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/promotions", s.create)
	mux.HandleFunc("GET /v1/promotions/{id}", s.get)
	mux.HandleFunc("POST /v1/promotions/{id}/claims", s.claim)
	mux.HandleFunc("GET /v1/promotions/{id}/claims/{user}", s.status)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeProblem(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"title": code, "status": status, "code": code, "detail": code})
}

func (s *scriptedServer) create(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		writeProblem(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	var body struct {
		ID           string `json:"id"`
		Stock        int    `json:"stock"`
		PerUserLimit int    `json:"per_user_limit"`
		Mode, Kind   string
		Name         string
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.ID == "" {
		writeProblem(w, http.StatusBadRequest, "invalid_request")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.promos[body.ID]; ok {
		writeProblem(w, http.StatusConflict, "already_exists")
		return
	}
	s.promos[body.ID] = &scriptedPromo{stock: body.Stock, limit: body.PerUserLimit, users: map[string][]int64{}}
	writeJSON(w, http.StatusCreated, map[string]any{"id": body.ID, "stock": body.Stock})
}

func (s *scriptedServer) get(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.promos[r.PathValue("id")]
	if !ok {
		writeProblem(w, http.StatusNotFound, "not_found")
		return
	}
	switch {
	case s.neverIssue:
	case s.issuePerPoll > 0:
		p.issued = min(p.seq, p.issued+s.issuePerPoll)
	default:
		p.issued = p.seq
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": r.PathValue("id"), "state": "open", "counts": map[string]any{
		"accepted": p.seq, "pending": p.seq - p.issued, "issued": p.issued, "failed": 0, "remaining": int64(p.stock) - p.seq,
	}})
}

// arrive holds a claim until waveSize claims are waiting, or fails after a
// deadline, which means the client did not send the wave together.
func (s *scriptedServer) arrive(user string) bool {
	n, _ := strconv.Atoi(strings.TrimPrefix(user, DefaultUserPrefix))
	s.mu.Lock()
	if wave := (n - 1) / s.waveSize; s.answered < wave*s.waveSize && s.violation == "" {
		s.violation = fmt.Sprintf("%s of wave %d arrived with only %d claims answered", user, wave+1, s.answered)
	}
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
	gate := s.gate
	s.waiting++
	if s.waiting == s.waveSize {
		close(gate)
		s.gate, s.waiting = nil, 0
	}
	s.mu.Unlock()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-gate:
		return true
	case <-timer.C:
		return false
	}
}

func (s *scriptedServer) claim(w http.ResponseWriter, r *http.Request) {
	var body struct {
		UserID string `json:"user_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeProblem(w, http.StatusBadRequest, "invalid_request")
		return
	}
	if s.waveSize > 0 && !s.arrive(body.UserID) {
		writeProblem(w, http.StatusServiceUnavailable, "wave_not_together")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.answered++ }()
	s.claims++
	p, ok := s.promos[r.PathValue("id")]
	switch {
	case !ok:
		writeProblem(w, http.StatusNotFound, "not_found")
	case s.failEvery > 0 && s.claims%s.failEvery == 0:
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("internal error"))
	case !s.ignoreLimit && len(p.users[body.UserID]) >= p.limit:
		writeProblem(w, http.StatusConflict, "already_claimed")
	case !s.ignoreStock && p.seq >= int64(p.stock):
		writeProblem(w, http.StatusGone, "sold_out")
	default:
		p.seq++
		rank := p.seq
		if rank == s.repeatRank {
			rank--
		}
		p.users[body.UserID] = append(p.users[body.UserID], rank)
		writeJSON(w, http.StatusAccepted, map[string]any{"status": "pending", "claim_id": fmt.Sprintf("%s#%d", r.PathValue("id"), rank), "rank": rank})
	}
}

func (s *scriptedServer) status(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.promos[r.PathValue("id")]
	if !ok {
		writeProblem(w, http.StatusNotFound, "not_found")
		return
	}
	ranks := p.users[r.PathValue("user")]
	if s.lieAboutStatus {
		ranks = nil
	}
	type claim struct {
		ClaimID string `json:"claim_id"`
		Rank    int64  `json:"rank"`
		Status  string `json:"status"`
	}
	claims := []claim{}
	overall := "none"
	for _, rank := range ranks {
		st := "pending"
		if rank <= p.issued {
			st = "issued"
		}
		if overall != "pending" {
			overall = st
		}
		claims = append(claims, claim{fmt.Sprintf("%s#%d", r.PathValue("id"), rank), rank, st})
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": overall, "claims": claims})
}

func setup(t *testing.T, s *scriptedServer) (Config, *strings.Builder) {
	t.Helper()
	srv := newScriptedServer(t, s)
	progress := &strings.Builder{}
	return Config{
		Target:         srv.URL,
		AdminToken:     "secret",
		PromotionID:    strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()),
		ConfirmTimeout: 10 * time.Second,
		PollInterval:   time.Millisecond,
		Progress:       progress,
	}, progress
}

func statuses(r Report) map[string]Status {
	m := map[string]Status{}
	for _, c := range r.Checks {
		m[c.Name] = c.Status
	}
	return m
}

func TestRunWaves(t *testing.T) {
	t.Parallel()
	s := &scriptedServer{waveSize: 50}
	cfg, progress := setup(t, s)
	cfg.Stock, cfg.Users, cfg.Waves = 50, 100, 2
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.violation != "" {
		t.Fatalf("waves overlapped: %s", s.violation)
	}
	if !rep.OK() {
		t.Fatalf("report not OK:\n%s", text(t, rep))
	}
	for name, st := range statuses(rep) {
		if st != Pass {
			t.Errorf("check %s: %s", name, st)
		}
	}
	if rep.Accepted != 50 || rep.Rejected["sold_out"] != 50 || len(rep.Rejected) != 1 {
		t.Errorf("accepted %d, rejected %v; want 50 and sold_out 50", rep.Accepted, rep.Rejected)
	}
	if rep.Claims != 100 || rep.Concurrency != 50 || rep.Waves != 2 || !rep.AllIssued {
		t.Errorf("report shape: %+v", rep)
	}
	if rep.Latency.P50 <= 0 || rep.Latency.P99 < rep.Latency.P50 || rep.Latency.Max < rep.Latency.P999 || rep.Throughput() <= 0 {
		t.Errorf("latency/throughput not measured: %+v, %v/s", rep.Latency, rep.Throughput())
	}
	for _, want := range []string{"wave 1/2: 50 sent, 50 accepted, 0 rejected", "wave 2/2: 50 sent, 0 accepted, 50 rejected (sold_out 50)", "confirmed: 50/50 issued"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress)
		}
	}
}

func TestRunSteady(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                                     string
		stock, users, limit, repeat, concurrency int
		wantAccepted                             int64
	}{
		{"one claim each", 30, 40, 1, 1, 8, 30},
		{"repeat within limit", 100, 20, 2, 3, 4, 40},
		{"repeat capped by stock", 30, 20, 2, 3, 5, 30},
		{"one worker", 5, 10, 1, 1, 1, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &scriptedServer{issuePerPoll: 3}
			cfg, progress := setup(t, s)
			cfg.Stock, cfg.Users, cfg.PerUserLimit, cfg.Repeat, cfg.Concurrency = tt.stock, tt.users, tt.limit, tt.repeat, tt.concurrency
			rep, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() || rep.Accepted != tt.wantAccepted || rep.Claims != tt.users*tt.repeat {
				t.Fatalf("accepted %d of %d claims, want %d:\n%s", rep.Accepted, rep.Claims, tt.wantAccepted, text(t, rep))
			}
			if rep.Server.Issued != tt.wantAccepted || !rep.AllIssued {
				t.Errorf("server counts %+v", rep.Server)
			}
			total := tt.users * tt.repeat
			if want := fmt.Sprintf("%d/%d claims: %d accepted", total, total, tt.wantAccepted); !strings.Contains(progress.String(), want) {
				t.Errorf("progress lacks %q:\n%s", want, progress)
			}
		})
	}
}

// TestRunCatchesBrokenServer shows each check failing on the breakage it
// exists for.
func TestRunCatchesBrokenServer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stock  int
		breaks func(*scriptedServer)
		fail   []string
		skip   []string
	}{
		{"oversell", 20, func(s *scriptedServer) { s.ignoreStock = true }, []string{CheckNoOversell, CheckExactCount}, nil},
		{"repeated rank", 20, func(s *scriptedServer) { s.repeatRank = 7 }, []string{CheckRanks}, nil},
		{"per-user limit ignored", 100, func(s *scriptedServer) { s.ignoreLimit = true }, []string{CheckPerUserLimit, CheckExactCount}, nil},
		{"never issues", 20, func(s *scriptedServer) { s.neverIssue = true }, []string{CheckAllIssued, CheckSpot}, nil},
		{"status lies", 20, func(s *scriptedServer) { s.lieAboutStatus = true }, []string{CheckSpot}, nil},
		{"errors", 20, func(s *scriptedServer) { s.failEvery = 10 }, []string{CheckAnswered}, []string{CheckExactCount}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &scriptedServer{}
			tt.breaks(s)
			cfg, _ := setup(t, s)
			cfg.Stock, cfg.Users, cfg.Repeat, cfg.Concurrency = tt.stock, 30, 2, 4
			cfg.ConfirmTimeout = 300 * time.Millisecond
			rep, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() {
				t.Fatalf("report OK on a broken server:\n%s", text(t, rep))
			}
			want := map[string]Status{}
			for _, c := range rep.Checks {
				want[c.Name] = Pass
			}
			want[CheckSpot] = Pass
			for _, n := range tt.fail {
				want[n] = Fail
			}
			for _, n := range tt.skip {
				want[n] = Skip
			}
			got := statuses(rep)
			for name, st := range want {
				if got[name] != st {
					t.Errorf("check %s: %s, want %s", name, got[name], st)
				}
			}
			if t.Failed() {
				t.Log(text(t, rep))
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	t.Run("wrong token", func(t *testing.T) {
		t.Parallel()
		cfg, _ := setup(t, &scriptedServer{})
		cfg.AdminToken = "wrong"
		_, err := Run(context.Background(), cfg)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized || apiErr.Code != "unauthorized" {
			t.Fatalf("Run = %v, want an APIError 401 unauthorized", err)
		}
	})
	t.Run("promotion exists", func(t *testing.T) {
		t.Parallel()
		cfg, _ := setup(t, &scriptedServer{})
		cfg.Stock, cfg.Users = 1, 1
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		_, err := Run(context.Background(), cfg)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Code != "already_exists" {
			t.Fatalf("second Run = %v, want already_exists", err)
		}
	})
	t.Run("invalid config", func(t *testing.T) {
		t.Parallel()
		cfg, _ := setup(t, &scriptedServer{})
		cfg.Stock = -1
		if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("Run = %v, want ErrInvalidConfig", err)
		}
	})
	t.Run("nobody listening", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		_, err := Run(context.Background(), Config{Target: url, AdminToken: "t"})
		if err == nil || !strings.Contains(err.Error(), "create promotion") {
			t.Fatalf("Run = %v, want a create promotion error", err)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		t.Parallel()
		s := &scriptedServer{neverIssue: true}
		cfg, _ := setup(t, s)
		cfg.Stock, cfg.Users = 5, 5
		ctx, cancel := context.WithCancel(context.Background())
		// Cancel as soon as the confirmation wait starts: the run must end
		// with the context's error, not wait out its hour.
		cfg.Progress = progressHook{prefix: "waiting up to", fn: cancel}
		cfg.ConfirmTimeout = time.Hour
		_, err := Run(ctx, cfg)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	})
}

// progressHook calls fn when a progress line starts with prefix.
type progressHook struct {
	prefix string
	fn     func()
}

func (p progressHook) Write(b []byte) (int, error) {
	if strings.HasPrefix(string(b), p.prefix) {
		p.fn()
	}
	return len(b), nil
}

func text(t *testing.T, r Report) string {
	t.Helper()
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
