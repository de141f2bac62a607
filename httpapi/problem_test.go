package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/waitroom"
)

// TestProblemForMapsThePromotionVocabulary: every sentinel of the promotion
// package, wrapped or not, maps to its code and status; a 503 carries
// Retry-After.
func TestProblemForMapsThePromotionVocabulary(t *testing.T) {
	t.Parallel()
	s := &failureLogs{log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		err   error
		code  string
		retry bool
	}{
		{promotion.ErrNotFound, CodeNotFound, false},
		{promotion.ErrAlreadyExists, CodeAlreadyExists, false},
		{promotion.ErrWrongMode, CodeInvalidRequest, false},
		{&promotion.ValidationError{Field: "stock", Reason: "too low"}, CodeInvalidRequest, false},
		{promotion.ErrAlreadyClaimed, CodeAlreadyClaimed, false},
		{promotion.ErrNotStarted, CodeNotStarted, false},
		{promotion.ErrEnded, CodeEnded, false},
		{promotion.ErrSoldOut, CodeSoldOut, false},
		{promotion.ErrVoided, CodeClaimVoided, false},
		{promotion.ErrRebuildBusy, CodeRebuildInProgress, true},
		{promotion.ErrRebuilding, CodeUnavailable, true},
		{promotion.ErrNotReady, CodeUnavailable, true},
		// The waiting room's and the code pool's, once switched on by their
		// handlers alone.
		{promotion.ErrNotJoined, CodeNotFound, false},
		{promotion.ErrRoomSoldOut, CodeSoldOut, false},
		{promotion.ErrRoomEnded, CodeEnded, false},
		{promotion.ErrRoomNotFound, CodeUnavailable, true},
		{&promotion.ChallengeError{Reason: waitroom.ErrProofMissing, Difficulty: 8, Challenge: "c"}, CodeChallengeRequired, false},
		{promotion.ErrNoPrequeue, CodeNotFound, false},
		{promotion.ErrNotShuffled, CodeUnavailable, true},
		{promotion.ErrNoPoolForKind, CodeNoPoolForKind, false},
		{promotion.ErrPoolAfterStart, CodePoolAfterStart, false},
		{&promotion.NotEnoughCodesError{Stock: 5, Codes: 3}, CodeNotEnoughCodes, false},
	} {
		t.Run(tc.code+"/"+tc.err.Error(), func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodPost, "/v1/promotions/p/claims", nil)
			for _, err := range []error{tc.err, fmt.Errorf("claim p for u: %w", tc.err)} {
				pr := s.problemFor(r, err)
				if pr.Code != tc.code || pr.Status != codeStatus[tc.code] || (pr.retryAfter > 0) != tc.retry {
					t.Errorf("%v: %s %d retry %d; want %s", err, pr.Code, pr.Status, pr.retryAfter, tc.code)
				}
			}
		})
	}
}

// FuzzProblemJSON checks the reflection-free encoding of problems against
// json.Encoder, byte for byte, whatever the members hold.
func FuzzProblemJSON(f *testing.F) {
	f.Add(CodeSoldOut, "the stock is exhausted", "/v1/promotions/p/claims", "", "K4XQ2M7VZB3T6YHN5JDC8RWAPE", 410)
	f.Add(CodeChallengeRequired, "the waiting room asks for a proof of work", "/v1/promotions/p/queue", "", "K4XQ", 403)
	f.Add(CodeInvalidRequest, `malformed JSON at byte 3: invalid character '<' in "x"`, "/a&b", "user_id", "order-42\\retry", 400)
	f.Add("", "", "", "", "", 0)
	f.Add("x", "caf\xc3\xa9 \xff \u2028 \x00\x1f\x7f", "\t", "é", "<>&", -1)
	f.Fuzz(func(t *testing.T, code, detail, instance, field, requestID string, status int) {
		p := problem(code, detail).withField(field)
		p.Instance, p.RequestID, p.Status = instance, requestID, status
		if status%2 == 0 { // the members of challenge_required, too
			exp := detail + "Z"
			p.Challenge, p.Difficulty, p.ChallengeExpiresAt = instance+"."+field, status/2, &exp
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(p); err != nil {
			t.Fatal(err)
		}
		if got := p.appendJSON(nil); string(got) != want.String() {
			t.Fatalf("appendJSON = %s, json.Encoder %s", got, want.Bytes())
		}
	})
}

// TestProblemWrite: a problem's answer is its status, its headers and
// json.Encoder's bytes of it, written through the request's answerWriter
// or any other writer.
func TestProblemWrite(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodPost, "/v1/promotions/p/claims", nil)
	for _, p := range []*Problem{
		problem(CodeSoldOut, "the stock is exhausted"),
		problem(CodeOverloaded, "too many requests in flight; retry shortly").retry(1),
		problem(CodeUnauthorized, "this endpoint needs an admin bearer token"),
		problem(CodeInvalidRequest, "user_id must be 1-64 characters from A-Z a-z 0-9 _ - . : @, starting with a letter or digit").withField("user_id"),
	} {
		for _, viaAnswerWriter := range []bool{false, true} {
			rec := httptest.NewRecorder()
			var w http.ResponseWriter = rec
			req := r
			if viaAnswerWriter {
				aw := &answerWriter{ResponseWriter: rec}
				req, w = withRequestID(aw, r), aw
			}
			q := *p
			q.write(w, req)
			var want bytes.Buffer
			_ = json.NewEncoder(&want).Encode(&q)
			if rec.Code != p.Status || rec.Body.String() != want.String() || q.Instance != r.URL.Path || q.RequestID != RequestID(req.Context()) {
				t.Errorf("%s (answerWriter %v): %d %s, want %d %s", p.Code, viaAnswerWriter, rec.Code, rec.Body, p.Status, want.Bytes())
			}
			h := rec.Header()
			if h.Get("Content-Type") != "application/problem+json" || h.Get("Cache-Control") != "no-store" ||
				(p.retryAfter > 0) != (h.Get("Retry-After") == "1") || (p.Code == CodeUnauthorized) != (h.Get("WWW-Authenticate") != "") {
				t.Errorf("%s (answerWriter %v): headers %v", p.Code, viaAnswerWriter, h)
			}
		}
	}
}
