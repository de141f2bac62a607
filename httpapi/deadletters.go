package httpapi

import (
	"net/http"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/promotion"
)

func (s *Server) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	after, limit, pr := page(r)
	if pr != nil {
		pr.write(w, r)
		return
	}
	ds, err := s.cfg.Manager.DeadLetters(r.Context(), id, after, limit+1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	more := len(ds) > limit
	if more {
		ds = ds[:limit]
	}
	out := api.DeadLetterPage{DeadLetters: make([]api.DeadLetter, 0, len(ds))}
	for _, d := range ds {
		out.DeadLetters = append(out.DeadLetters, toDeadLetterOut(d))
	}
	if more {
		out.NextCursor = nextCursor(ds[len(ds)-1].ClaimID, limit, limit)
	}
	writeJSON(w, http.StatusOK, out)
}

func toDeadLetterOut(d promotion.DeadLetter) api.DeadLetter {
	return api.DeadLetter{ClaimID: d.ClaimID, UserID: d.UserID, Reason: d.Reason, Deliveries: d.Deliveries, At: d.At.UTC()}
}

// MaxClaimIDs bounds the claim ids of one replay or void request.
const MaxClaimIDs = 1000

func validClaimIDs(ids []string) *Problem {
	if len(ids) > MaxClaimIDs {
		return problem(CodeInvalidRequest, "at most 1000 claim_ids per request").withField("claim_ids")
	}
	for _, c := range ids {
		if c == "" || len(c) > 200 {
			return problem(CodeInvalidRequest, "claim_ids holds an empty or overlong id").withField("claim_ids")
		}
	}
	return nil
}

func (s *Server) replayDeadLetters(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	var in api.ReplayRequest
	if pr := decodeJSON(w, r, MaxBodyBytes, &in); pr != nil {
		pr.write(w, r)
		return
	}
	if in.All == (len(in.ClaimIDs) > 0) {
		problem(CodeInvalidRequest, `give either "claim_ids" (non-empty) or "all": true`).write(w, r)
		return
	}
	if pr := validClaimIDs(in.ClaimIDs); pr != nil {
		pr.write(w, r)
		return
	}
	var ids []string
	if in.All {
		annotate(r, "all", true)
	} else {
		ids = in.ClaimIDs
		annotate(r, "claim_ids", ids)
	}
	n, err := s.cfg.Manager.Replay(r.Context(), id, ids)
	annotate(r, "count", n) // on an error, those replayed before it
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, api.Replayed{Replayed: n})
}

// claimIDsIn decodes a body {"claim_ids": [...]}: 1 or more valid claim
// ids, all or nothing. On a bad body it writes the problem and returns
// false.
func claimIDsIn(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	var in api.ClaimIDs
	if pr := decodeJSON(w, r, MaxBodyBytes, &in); pr != nil {
		pr.write(w, r)
		return nil, false
	}
	if len(in.ClaimIDs) == 0 {
		problem(CodeInvalidRequest, "claim_ids must not be empty").withField("claim_ids").write(w, r)
		return nil, false
	}
	if pr := validClaimIDs(in.ClaimIDs); pr != nil {
		pr.write(w, r)
		return nil, false
	}
	return in.ClaimIDs, true
}

func (s *Server) voidDeadLetters(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	ids, ok := claimIDsIn(w, r)
	if !ok {
		return
	}
	annotate(r, "claim_ids", ids)
	n, err := s.cfg.Manager.Void(r.Context(), id, ids)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	annotate(r, "count", n)
	writeJSON(w, http.StatusOK, api.Voided{Voided: n})
}
