package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReadWinners reads the winners endpoint as the report does: the
// request names the promotion, status and limit and carries the admin
// token; a refusal is an APIError.
func TestReadWinners(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer adm" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"code":"unauthorized"}`))
			return
		}
		if r.URL.EscapedPath() != "/v1/promotions/p%201/claims" ||
			r.URL.Query().Get("status") != "issued" || r.URL.Query().Get("limit") != "2" {
			t.Errorf("request %s", r.URL)
		}
		w.Write([]byte(`{"claims":[{"rank":1,"claim_id":"p 1#1","user_id":"u7","slot":1,"code":"ABC"},
			{"rank":2,"claim_id":"p 1#2","user_id":"u3","slot":1}],"next_cursor":"x"}`))
	}))
	defer srv.Close()
	ws, err := ReadWinners(t.Context(), srv.Client(), srv.URL, "adm", "p 1", 2)
	if err != nil || len(ws) != 2 || ws[0] != (Winner{Rank: 1, ClaimID: "p 1#1", UserID: "u7", Code: "ABC"}) || ws[1].Code != "" {
		t.Fatalf("ReadWinners = %+v, %v", ws, err)
	}
	var api *APIError
	if _, err := ReadWinners(t.Context(), srv.Client(), srv.URL, "bad", "p 1", 2); !errors.As(err, &api) {
		t.Fatalf("ReadWinners with a bad token = %v, want an APIError", err)
	}

	rep := sampleReport()
	rep.Winners = ws
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nfirst 2 winners\n", "  #1  u7  p 1#1  ABC\n", "  #2  u3  p 1#2  (no code)\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, b.String())
		}
	}
	var j struct {
		Winners []Winner `json:"winners"`
	}
	raw, err := json.Marshal(rep)
	if err != nil || json.Unmarshal(raw, &j) != nil || len(j.Winners) != 2 || j.Winners[0].Code != "ABC" {
		t.Errorf("JSON report winners: %s, %v", raw, err)
	}
}
