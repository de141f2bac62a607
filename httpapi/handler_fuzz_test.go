package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// fuzzCodes are the problem codes a client may meet.
var fuzzCodes = map[string]bool{
	httpapi.CodeInvalidRequest: true, httpapi.CodeUnauthorized: true, httpapi.CodeNotFound: true,
	httpapi.CodeAlreadyExists: true, httpapi.CodeAlreadyClaimed: true, httpapi.CodeNotStarted: true,
	httpapi.CodeEnded: true, httpapi.CodeNotAdmitted: true, httpapi.CodeSoldOut: true,
	httpapi.CodeTooLarge: true, httpapi.CodeOverloaded: true, httpapi.CodeUnavailable: true,
	httpapi.CodeMethod: true, httpapi.CodeClaimVoided: true, httpapi.CodeIdempotencyKeyReused: true,
	httpapi.CodeRequestInProgress: true,
}

// fuzzServer is the real API over real Redis and SQLite, shared by the
// inputs of one fuzz target in one process.
type fuzzServer struct {
	*env
	claims string // a first-come promotion that never sells out
	grants string // a grant promotion
}

func newFuzzServer(f *testing.F) *fuzzServer {
	f.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(f.TempDir(), "dibs.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		f.Fatal(err)
	}
	client := redistest.Client(f)
	prefix := redistest.Prefix(f)
	sc := stream.DefaultConfig()
	sc.Block = 200 * time.Millisecond
	sc.IdleTimeout = time.Second
	sc.Logger = slog.New(slog.DiscardHandler)
	mgr, err := promotion.New(client, st, promotion.Config{Prefix: prefix, Stream: sc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		f.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{Manager: mgr, AdminToken: token, Redis: client, KeyPrefix: prefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewServer(api)
	f.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = mgr.Stop(ctx)
	})
	s := &fuzzServer{env: &env{url: srv.URL}, claims: "fuzz-claims", grants: "fuzz-grants"}
	for _, body := range []string{
		`{"id":"fuzz-claims","stock":1000000000,"per_user_limit":1000}`,
		`{"id":"fuzz-grants","mode":"grant"}`,
	} {
		req, err := http.NewRequest("POST", srv.URL+"/v1/promotions", strings.NewReader(body))
		if err != nil {
			f.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			f.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			f.Fatalf("create %s: %d", body, res.StatusCode)
		}
	}
	return s
}

// checkAnswer fails unless the answer is a 2xx or a 4xx problem document
// with a known code and the status that goes with it.
func checkAnswer(t *testing.T, r response) {
	t.Helper()
	if r.status >= 500 {
		t.Fatalf("server error %d: %s", r.status, r.raw)
	}
	if r.status < 300 {
		return
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%d with Content-Type %q: %s", r.status, ct, r.raw)
	}
	var p httpapi.Problem
	if err := json.Unmarshal([]byte(r.raw), &p); err != nil {
		t.Fatalf("%d with a problem that is no JSON: %v: %s", r.status, err, r.raw)
	}
	if !fuzzCodes[p.Code] || p.Status != r.status {
		t.Fatalf("%d with problem %+v", r.status, p)
	}
}

// strictDecode decodes like the API does: one JSON value, no unknown
// fields, nothing after it.
func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the value")
	}
	return nil
}

// FuzzClaimRequest sends arbitrary claim bodies and Idempotency-Keys through
// the real handler. It never answers 5xx; every refusal is a problem with a
// known code; a body with a valid user_id and no bad key is accepted (or
// refused for the user's limit), anything else is invalid_request.
func FuzzClaimRequest(f *testing.F) {
	for _, s := range [][2]string{{`{"user_id":"u-1"}`, ""}, {`{"user_id":"u-1"}`, "key-1"}, {`{"user_id":"u-1"}`, "\t"},
		{`{"user_id":"_u"}`, ""}, {`{"user_id":"u","x":1}`, ""}, {`{"user_id":1}`, ""}, {`{}`, ""}, {``, ""},
		{`{"user_id":"u"} {}`, ""}, {`{"user_id":"u"`, ""}, {`[`, ""}, {`{"USER_ID":"u-2"}`, ""}, {`null`, ""}} {
		f.Add(s[0], s[1])
	}
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body, key string) {
		var hdr []string
		if key != "" {
			if strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
				return // not a header value a client can send
			}
			hdr = []string{"Idempotency-Key", key}
		}
		r := s.do(t, "POST", "/v1/promotions/"+s.claims+"/claims", body, hdr...)
		checkAnswer(t, r)
		var in struct {
			UserID string `json:"user_id"`
		}
		valid := strictDecode([]byte(body), &in) == nil && promotion.ValidID(in.UserID) && (key == "" || validKey(strings.Trim(key, " \t")))
		switch {
		case valid && r.status == http.StatusAccepted:
			var out struct {
				Status  string `json:"status"`
				ClaimID string `json:"claim_id"`
				Rank    int64  `json:"rank"`
			}
			if err := json.Unmarshal([]byte(r.raw), &out); err != nil || out.Status != "pending" || out.ClaimID == "" || out.Rank < 1 {
				t.Fatalf("202 with %s (%v)", r.raw, err)
			}
		case valid && r.status == http.StatusConflict:
		case !valid && r.status == http.StatusBadRequest:
		default:
			t.Fatalf("body %q key %q (valid %v): %d %s", body, key, valid, r.status, r.raw)
		}
	})
}

func validKey(k string) bool {
	if len(k) < 1 || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// FuzzCreatePromotion sends arbitrary promotion bodies through the real
// handler. It never answers 5xx; every refusal is a problem with a known
// code; a promotion it creates can be read back.
func FuzzCreatePromotion(f *testing.F) {
	for _, s := range []string{`{"stock":10}`, `{"id":"p-1","stock":10,"per_user_limit":2,"kind":"voucher","value":5}`,
		`{"mode":"grant"}`, `{"stock":0}`, `{"stock":-1}`, `{"stock":1e3}`, `{"stock":"10"}`, `{"stock":10,"starts_at":"2026-01-01T00:00:00Z","ends_at":"2025-01-01T00:00:00Z"}`,
		`{"stock":10,"starts_at":"0001-01-01T00:00:00Z"}`, `{"stock":10,"waiting_room":{"enabled":true}}`, `{"stock":10,"waiting_room":{"admit_per_second":0}}`,
		`{"id":"_p","stock":1}`, `{"stock":10,"extra":true}`, `{"stock":99999999999999999999}`, `{"name":"` + strings.Repeat("n", 201) + `","stock":1}`} {
		f.Add(s)
	}
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body string) {
		r := s.admin(t, "POST", "/v1/promotions", body)
		checkAnswer(t, r)
		if r.status != http.StatusCreated {
			return
		}
		var out struct {
			ID    string `json:"id"`
			Stock int64  `json:"stock"`
		}
		if err := json.Unmarshal([]byte(r.raw), &out); err != nil || !promotion.ValidID(out.ID) {
			t.Fatalf("201 with %s (%v)", r.raw, err)
		}
		if got := s.do(t, "GET", "/v1/promotions/"+out.ID, ""); got.status != http.StatusOK {
			t.Fatalf("created %s, then GET answers %d %s", r.raw, got.status, got.raw)
		}
	})
}

// FuzzGrantUpload streams arbitrary NDJSON uploads through the real handler.
// It never answers 5xx; an accepted upload accounts for every line that is
// not blank: enqueued or duplicate if it is a valid line, rejected if not.
func FuzzGrantUpload(f *testing.F) {
	for _, s := range []string{"{\"user_id\":\"a\"}\n{\"user_id\":\"b\"}\n", "{\"user_id\":\"a\"}\r\n\n  \n{\"user_id\":\"_\"}",
		"not json\n{\"user_id\":\"c\",\"x\":1}\n", "", "\n\n", "{\"user_id\":\"d\"}{\"user_id\":\"e\"}\n", "\xff\xfe\n"} {
		f.Add([]byte(s))
	}
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		r := s.do(t, "POST", "/v1/promotions/"+s.grants+"/grants", string(body),
			"Content-Type", "application/x-ndjson", "Authorization", "Bearer "+token)
		checkAnswer(t, r)
		if r.status != http.StatusAccepted {
			t.Fatalf("upload answered %d %s", r.status, r.raw)
		}
		var out struct {
			Enqueued, Duplicates, Rejected int
			Errors                         []struct{ Line int }
		}
		if err := json.Unmarshal([]byte(r.raw), &out); err != nil {
			t.Fatalf("202 with %s: %v", r.raw, err)
		}
		valid, invalid := 0, 0
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var in struct {
				UserID string `json:"user_id"`
			}
			if len(line) <= httpapi.MaxGrantLineBytes && strictDecode(line, &in) == nil && promotion.ValidID(in.UserID) {
				valid++
			} else {
				invalid++
			}
		}
		if out.Enqueued+out.Duplicates != valid || out.Rejected != invalid || len(out.Errors) != min(invalid, 100) {
			t.Fatalf("upload of %d valid and %d invalid lines answered %s", valid, invalid, r.raw)
		}
	})
}
