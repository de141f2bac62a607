package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/promotion"
)

// claimRows reads the claims the database knows of a promotion by rank;
// promotion.Records is one. Known answers promotion.ErrNotFound for a
// promotion the database does not hold.
type claimRows interface {
	Known(ctx context.Context, id string) error
	ClaimsByRank(ctx context.Context, id string, afterRank int64, limit int) ([]promotion.KnownClaim, error)
}

// getClaim finds one claim by its id, as an operator pastes it from a log
// or a shop's ticket: <promotion>#<rank> (the database's row of that rank
// names the user) or <promotion>@<user> (a grant). It answers the claim's
// status as GET …/claims/{user_id} tells it. 404 not_found for an id of no
// known promotion, or a rank the database holds nothing for yet (a claim
// still pending is found through its user).
func (s *Server) getClaim(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("claim_id")
	if id == "" || len(id) > 200 {
		problem(CodeInvalidRequest, "claim_id must be 1-200 characters").withField("claim_id").write(w, r)
		return
	}
	promo, user, ok := s.claimOwner(w, r, id)
	if !ok {
		return
	}
	cs, err := s.cfg.Manager.UserClaims(r.Context(), promo, user)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, c := range cs {
		if c.ClaimID == id {
			writeJSON(w, http.StatusOK, api.ClaimLookup{PromotionID: promo, UserID: user, Claim: toUserClaim(c)})
			return
		}
	}
	problem(CodeNotFound, "no claim of this id").write(w, r)
}

// claimOwner reads the promotion and user of claim id; ok false means the
// answer was written.
func (s *Server) claimOwner(w http.ResponseWriter, r *http.Request, id string) (promo, user string, ok bool) {
	ctx := r.Context()
	if i := strings.LastIndexByte(id, '#'); i > 0 {
		rank, err := strconv.ParseInt(id[i+1:], 10, 64)
		if err != nil || rank < 1 {
			problem(CodeInvalidRequest, "a claim id is <promotion>#<rank> or <promotion>@<user>").withField("claim_id").write(w, r)
			return "", "", false
		}
		promo = id[:i]
		kcs, err := s.rec.claims.ClaimsByRank(ctx, promo, rank-1, 1)
		if err != nil {
			s.fail(w, r, err)
			return "", "", false
		}
		if len(kcs) == 0 || kcs[0].Rank != rank {
			if err := s.rec.claims.Known(ctx, promo); err != nil {
				s.fail(w, r, err)
				return "", "", false
			}
			problem(CodeNotFound, "the database holds no claim of this rank yet: a pending claim is found through its user").write(w, r)
			return "", "", false
		}
		return promo, kcs[0].UserID, true
	}
	// <promotion>@<user>: either may hold an @ itself; the promotion is the
	// first prefix the database knows.
	for i := 0; i < len(id); i++ {
		if id[i] != '@' || i == 0 || i == len(id)-1 {
			continue
		}
		if !promotion.ValidID(id[:i]) || !promotion.ValidID(id[i+1:]) {
			continue
		}
		if err := s.rec.claims.Known(ctx, id[:i]); err == nil {
			return id[:i], id[i+1:], true
		}
	}
	problem(CodeNotFound, "no promotion of this claim id").write(w, r)
	return "", "", false
}
