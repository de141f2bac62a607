package httpapi

import (
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
	s := &Server{log: slog.New(slog.DiscardHandler)}
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
