package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dibsio/dibs/api"
)

// FuzzPlainClaim checks the reflection-free reading of claim bodies against
// encoding/json's strict decoding: whatever body plainClaim accepts, the
// strict decoder accepts too, with the same user id; and the canonical body
// of any id is always taken by plainClaim.
func FuzzPlainClaim(f *testing.F) {
	for _, s := range []string{`{"user_id":"u-1"}`, " {\"user_id\":\"u-1\"}\n", `{"user_id":""}`, `{"user_id":"u\u002d1"}`,
		`{"user_id":"u-1","x":1}`, `{"user_id":"u"}{}`, `{"USER_ID":"u"}`, `{"user_id":"a\"b"}`, `{"user_id":"é"}`, "\xff", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		u, ok := plainClaim(raw)
		if !ok {
			return
		}
		var in api.UserRef
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			t.Fatalf("plainClaim(%q) = %q, but encoding/json refuses it: %v", raw, u, err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			t.Fatalf("plainClaim(%q) = %q, but encoding/json finds more after the value", raw, u)
		}
		if in.UserID != u {
			t.Fatalf("plainClaim(%q) = %q, encoding/json decodes %q", raw, u, in.UserID)
		}
	})
}

// FuzzDecodeClaim checks decodeClaim against decodeJSON, the strict
// decoding of every other body: the same user id, or the same problem.
func FuzzDecodeClaim(f *testing.F) {
	for _, s := range []string{`{"user_id":"u-1"}`, " {\"user_id\":\"u-1\"}\n", `{"user_id":"u\u002d1"}`, `{"user_id":"u-1","x":1}`,
		`{"user_id":"u"}{}`, `{"user_id":1}`, `{"user_id":"` + strings.Repeat("a", 200) + `"}`, `{`, "\xff", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var got, want api.UserRef
		r := httptest.NewRequest("POST", "/v1/promotions/p/claims", bytes.NewReader(raw))
		gp := decodeClaim(&answerWriter{ResponseWriter: httptest.NewRecorder()}, r, &got)
		r = httptest.NewRequest("POST", "/v1/promotions/p/claims", bytes.NewReader(raw))
		wp := decodeJSON(httptest.NewRecorder(), r, MaxBodyBytes, &want)
		switch {
		case (gp == nil) != (wp == nil):
			t.Fatalf("decodeClaim(%q) = %+v, decodeJSON %+v", raw, gp, wp)
		case gp == nil && got != want:
			t.Fatalf("decodeClaim(%q) = %q, decodeJSON %q", raw, got.UserID, want.UserID)
		case gp != nil && (gp.Code != wp.Code || gp.Detail != wp.Detail || gp.Field != wp.Field):
			t.Fatalf("decodeClaim(%q) = %s %q %s, decodeJSON %s %q %s", raw, gp.Code, gp.Detail, gp.Field, wp.Code, wp.Detail, wp.Field)
		}
	})
}

// TestDecodeClaim reads bodies through decodeClaim: the canonical ones by
// the plain path, the others by the strict decoder with its answers.
func TestDecodeClaim(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body, user, code string
	}{
		{body: `{"user_id":"u-1"}`, user: "u-1"},
		{body: " {\"user_id\": \"u-1\"}\n", user: "u-1"},
		{body: `{"user_id":"u\u002d1"}`, user: "u-1"},
		{body: `{"user_id":"u-1","x":1}`, code: CodeInvalidRequest},
		{body: `{"user_id":"u-1"} {}`, code: CodeInvalidRequest},
		{body: ``, code: CodeInvalidRequest},
		{body: `{"user_id":1}`, code: CodeInvalidRequest},
		{body: `{"user_id":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, code: CodeTooLarge},
	}
	// Around the end of the scratch space and of MaxBodyBytes.
	plain := `{"user_id":"u-1"}`
	for _, n := range []int{scratchLen - 1, scratchLen, scratchLen + 1, 3 * scratchLen, MaxBodyBytes} {
		tests = append(tests, struct{ body, user, code string }{body: strings.Repeat(" ", n-len(plain)) + plain, user: "u-1"})
	}
	tests = append(tests, struct{ body, user, code string }{body: strings.Repeat(" ", MaxBodyBytes+1-len(plain)) + plain, code: CodeTooLarge})
	for i, tt := range tests {
		r := httptest.NewRequest("POST", "/v1/promotions/p/claims", strings.NewReader(tt.body))
		var in api.UserRef
		var w http.ResponseWriter = httptest.NewRecorder()
		if i%2 == 0 {
			w = &answerWriter{ResponseWriter: w} // its scratch space
		}
		pr := decodeClaim(w, r, &in)
		switch {
		case tt.code == "" && pr != nil:
			t.Errorf("decodeClaim(%.40q): %s %s, want user %q", tt.body, pr.Code, pr.Detail, tt.user)
		case tt.code == "" && in.UserID != tt.user:
			t.Errorf("decodeClaim(%.40q) = %q, want %q", tt.body, in.UserID, tt.user)
		case tt.code != "" && (pr == nil || pr.Code != tt.code):
			t.Errorf("decodeClaim(%.40q) = %+v, want code %s", tt.body, pr, tt.code)
		}
	}
}

// TestWriteClaimAccepted compares the hand-written 202 with what writeJSON
// writes for the same answer, byte for byte and header for header.
func TestWriteClaimAccepted(t *testing.T) {
	t.Parallel()
	for _, out := range []api.Claimed{
		{Status: "pending", ClaimID: "p-1#42", Rank: 42},
		{Status: "pending", ClaimID: "a<b>&\"c\\\x01é#7", Rank: 7},
		{Status: "pending", ClaimID: "", Rank: 0},
	} {
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		writeClaimAccepted(got, out)
		writeJSON(want, 202, out)
		if got.Code != want.Code || got.Body.String() != want.Body.String() {
			t.Errorf("writeClaimAccepted(%+v) = %d %q, writeJSON %d %q", out, got.Code, got.Body, want.Code, want.Body)
		}
		for _, h := range []string{"Content-Type", "Cache-Control"} {
			if got.Header().Get(h) != want.Header().Get(h) {
				t.Errorf("%s = %q, writeJSON sets %q", h, got.Header().Get(h), want.Header().Get(h))
			}
		}
	}
}
