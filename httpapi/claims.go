package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/dibsio/dibs/httpapi/edge"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

type claimIn struct {
	UserID string `json:"user_id"`
}

type claimOut struct {
	Status  string `json:"status"`
	ClaimID string `json:"claim_id"`
	Rank    int64  `json:"rank"`
}

func (s *Server) postClaim(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	outcome := "error"
	id := r.PathValue("id")
	defer func() {
		s.m.claim(outcome)
		s.hub.Tally().Answer(id, outcome)
		s.m.ClaimSeconds.Observe(time.Since(start).Seconds())
	}()
	reject := func(pr *Problem) {
		outcome = pr.Code
		pr.write(w, r)
	}
	if _, ok := pathID(w, r, "id"); !ok {
		outcome = CodeInvalidRequest
		return
	}
	var in claimIn
	if pr := decodeClaim(w, r, &in); pr != nil {
		reject(pr)
		return
	}
	// With user tokens on, the user is the token's; a body naming another
	// is refused, and one naming none acts for the token's user.
	user, err := edge.CheckUser(r.Context(), in.UserID)
	if err != nil {
		reject(problem(CodeInvalidRequest, "user_id is not the user of the token").withField("user_id"))
		return
	}
	in.UserID = user
	if !promotion.ValidID(in.UserID) {
		reject(problem(CodeInvalidRequest, "user_id must be 1-64 characters from A-Z a-z 0-9 _ - . : @, starting with a letter or digit").withField("user_id"))
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if _, present := r.Header["Idempotency-Key"]; present && !validIdempotencyKey(key) {
		reject(problem(CodeInvalidRequest, "Idempotency-Key must be 1-64 printable ASCII characters").withField("Idempotency-Key"))
		return
	}
	// A claim goes on when its client leaves: Redis may take it all the
	// same, and the client's retry with the same Idempotency-Key, or its
	// status read, finds it. It counts by what Redis answered; the request
	// counts as 499 (observe). ClaimTimeout alone bounds it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.ClaimTimeout)
	defer cancel()
	res, err := s.cfg.Manager.ClaimWithToken(ctx, id, in.UserID, key, r.Header.Get(EntryTokenHeader))
	if err != nil {
		pr := knownProblem(err)
		if pr == nil {
			reject(s.unexpected(r, err))
			return
		}
		s.redisAnswered()
		reject(pr)
		return
	}
	s.redisAnswered()
	outcome = "accepted"
	if res.Replayed {
		outcome = "replayed"
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeClaimAccepted(w, claimOut{Status: "pending", ClaimID: res.ClaimID, Rank: res.Rank})
}

// Header values of writeClaimAccepted, shared by every answer: net/http
// only reads them.
var (
	headerJSON    = []string{"application/json"}
	headerNoStore = []string{"no-store"}
)

// writeClaimAccepted writes the 202 of an accepted claim: the bytes
// writeJSON writes for out, encoded without reflection.
func writeClaimAccepted(w http.ResponseWriter, out claimOut) {
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["Cache-Control"] = headerNoStore
	w.WriteHeader(http.StatusAccepted)
	var buf [128]byte
	b := append(buf[:0], `{"status":`...)
	b = appendJSONString(b, out.Status)
	b = append(b, `,"claim_id":`...)
	b = appendJSONString(b, out.ClaimID)
	b = append(b, `,"rank":`...)
	b = strconv.AppendInt(b, out.Rank, 10)
	b = append(b, "}\n"...)
	_, _ = w.Write(b)
}

// appendJSONString appends s as encoding/json encodes it: directly when
// it has nothing to escape, by encoding/json otherwise.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

type userClaimOut struct {
	ClaimID  string  `json:"claim_id"`
	Rank     int64   `json:"rank"`
	Status   string  `json:"status"`
	IssuedAt *string `json:"issued_at"`
	// What an issued claim received: a coupon's or voucher's code and
	// value, a voucher's expiry, or the points a point claim credited (as
	// value). Left out until issued, and where the kind has none.
	Code      string  `json:"code,omitempty"`
	Value     *int64  `json:"value,omitempty"`
	ExpiresAt *string `json:"expires_at,omitempty"`
}

// withGrant adds what an issued claim received to its status.
func (o userClaimOut) withGrant(g store.Grant) userClaimOut {
	o.Code = g.Code
	switch {
	case g.Code != "":
		o.Value = &g.Value
	case g.Points != 0:
		o.Value = &g.Points
	}
	if !g.ExpiresAt.IsZero() {
		o.ExpiresAt = optTime(g.ExpiresAt)
	}
	return o
}

func (s *Server) getClaims(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	user, ok := pathID(w, r, "user_id")
	if !ok {
		return
	}
	cs, err := s.cfg.Manager.UserClaims(r.Context(), id, user)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Status string         `json:"status"`
		Claims []userClaimOut `json:"claims"`
	}{Status: summaryStatus(cs), Claims: make([]userClaimOut, 0, len(cs))}
	for _, c := range cs {
		out.Claims = append(out.Claims, userClaimOut{
			ClaimID: c.ClaimID, Rank: c.Rank, Status: c.Status, IssuedAt: optTime(c.IssuedAt),
		}.withGrant(c.Grant))
	}
	writeJSON(w, http.StatusOK, out)
}

// summaryStatus is the user's overall status: none without claims; pending
// while any claim is pending; failed while any is failed; issued if one is;
// revoked if none stands and one was revoked; none if all were voided.
func summaryStatus(cs []promotion.UserClaim) string {
	if len(cs) == 0 {
		return "none"
	}
	status, revoked := "", false
	for _, c := range cs {
		switch c.Status {
		case promotion.StatusRevoked:
			revoked = true
		case promotion.StatusPending:
			return promotion.StatusPending
		case promotion.StatusFailed:
			status = promotion.StatusFailed
		case promotion.StatusIssued:
			if status == "" {
				status = promotion.StatusIssued
			}
		}
	}
	if status == "" && revoked {
		return promotion.StatusRevoked // none stands, and an admin revoked one
	}
	if status == "" {
		return "none" // every claim was voided
	}
	return status
}
