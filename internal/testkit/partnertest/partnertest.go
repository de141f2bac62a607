// Package partnertest runs a partner's webhook endpoint for tests of the
// webhook issuer: it issues a code for each claim posted to it, and
// refuses (400) the claims of chosen users until it is told to accept them,
// so a test can make a dead letter the way production does and replay it;
// it can also be down (503 to every call).
package partnertest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Partner is a running endpoint. It is safe for concurrent use.
type Partner struct {
	srv *httptest.Server

	mu     sync.Mutex
	refuse map[string]bool // users whose claims are refused
	down   bool            // every call answers 503
}

// New starts an endpoint that refuses the claims of the users in refuse
// and issues every other one with the code "P-<user_id>". It stops when
// the test ends.
func New(t testing.TB, refuse ...string) *Partner {
	t.Helper()
	p := &Partner{refuse: map[string]bool{}}
	for _, u := range refuse {
		p.refuse[u] = true
	}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

// URL is the endpoint to give a promotion as its webhook_url.
func (p *Partner) URL() string { return p.srv.URL + "/issue" }

// Accept stops refusing the claims of users.
func (p *Partner) Accept(users ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range users {
		delete(p.refuse, u)
	}
}

// SetDown makes the endpoint answer every call 503 Service Unavailable (a
// partner that is down: the issuer backs off and retries), or, with false,
// serve again.
func (p *Partner) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

func (p *Partner) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		http.Error(w, `{"error":"down for maintenance"}`, http.StatusServiceUnavailable)
		return
	}
	var claim struct {
		UserID string `json:"user_id"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&claim); err != nil || claim.UserID == "" {
		http.Error(w, `{"error":"malformed claim"}`, http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	refused := p.refuse[claim.UserID]
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if refused {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"account not eligible"}`))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"code": "P-" + claim.UserID})
}
