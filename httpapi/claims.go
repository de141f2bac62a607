package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/httpapi/edge"
	"github.com/dibsio/dibs/internal/jsontext"
	"github.com/dibsio/dibs/promotion"
)

func (s *Server) postClaim(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	outcome := "error" // if the handler panics
	defer func() {
		s.m.claim(outcome)
		s.hub.Tally().Answer(r.PathValue("id"), outcome)
		s.m.ClaimSeconds.Observe(time.Since(start).Seconds())
	}()
	outcome = s.claim(w, r, start)
}

// claim serves a claim request that started at start and returns its
// outcome: accepted, replayed, or the code of its problem.
func (s *Server) claim(w http.ResponseWriter, r *http.Request, start time.Time) string {
	id, ok := pathID(w, r, "id")
	if !ok {
		return CodeInvalidRequest
	}
	var in api.UserRef
	if pr := decodeClaim(w, r, &in); pr != nil {
		return reject(w, r, pr)
	}
	// With user tokens on, the user is the token's; a body naming another
	// is refused, and one naming none acts for the token's user.
	user, err := edge.CheckUser(r.Context(), in.UserID)
	if err != nil {
		return reject(w, r, problem(CodeInvalidRequest, "user_id is not the user of the token").withField("user_id"))
	}
	in.UserID = user
	if !promotion.ValidID(in.UserID) {
		return reject(w, r, problem(CodeInvalidRequest, "user_id must be 1-64 characters from A-Z a-z 0-9 _ - . : @, starting with a letter or digit").withField("user_id"))
	}
	var key string
	if v, present := r.Header["Idempotency-Key"]; present {
		if len(v) > 0 {
			key = v[0]
		}
		if !validIdempotencyKey(key) {
			return reject(w, r, problem(CodeInvalidRequest, "Idempotency-Key must be 1-64 printable ASCII characters").withField("Idempotency-Key"))
		}
	}
	var token string
	if v := r.Header[EntryTokenHeader]; len(v) > 0 {
		token = v[0]
	}
	// A claim goes on when its client leaves: Redis may take it all the
	// same, and the client's retry with the same Idempotency-Key, or its
	// status read, finds it. It counts by what Redis answered; the request
	// counts as 499 (observe). ClaimTimeout alone bounds it.
	res, err := s.cfg.Manager.ClaimWithToken(s.claimContext(w, r, start), id, in.UserID, key, token)
	if err != nil {
		pr := knownProblem(err)
		if pr == nil {
			return reject(w, r, s.unexpected(r, err))
		}
		s.redisAnswered()
		return reject(w, r, pr)
	}
	s.redisAnswered()
	outcome := "accepted"
	if res.Replayed {
		outcome = "replayed"
		w.Header()["Idempotent-Replayed"] = headerTrue
	}
	writeClaimAccepted(w, api.Claimed{Status: "pending", ClaimID: res.ClaimID, Rank: res.Rank})
	return outcome
}

// reject writes pr and returns its code, the claim's outcome.
func reject(w http.ResponseWriter, r *http.Request, pr *Problem) string {
	pr.write(w, r)
	return pr.Code
}

// claimContext is a claim's context: r's values (its id, for the lines
// the claim causes), not its cancellation, and the deadline claimDeadlines
// gives a claim that starts at start. It lives in w's answerWriter.
func (s *Server) claimContext(w http.ResponseWriter, r *http.Request, start time.Time) context.Context {
	deadline := s.claimDeadlines.at(start)
	if aw, ok := w.(*answerWriter); ok {
		aw.claim = claimContext{Context: deadline, values: r.Context()}
		return &aw.claim
	}
	return &claimContext{Context: deadline, values: r.Context()}
}

// claimContext is the context of a claim's Redis call: Done, Err and
// Deadline are a shared deadline's (claimDeadlines), the values are the
// request's.
type claimContext struct {
	context.Context // the deadline
	values          context.Context
}

// Value answers the deadline's own keys (the context package's) as the
// deadline does, every other key as the request does.
func (c *claimContext) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}

// claimDeadlines gives claims their deadline without a timer each: claims
// that start within an eighth of ClaimTimeout share one context, so a
// claim's Redis call gets between 7/8 of ClaimTimeout and all of it. A new
// deadline is made by the first claim that finds the current one too near,
// never while no claims come.
type claimDeadlines struct {
	timeout time.Duration
	cur     atomic.Pointer[claimDeadline] // read by any request; replaced under mu
	mu      sync.Mutex                    // held by the request that replaces cur
}

// claimDeadline is one shared deadline. Its cancel is never called: the
// deadline's timer releases the context when it fires, and a claim may
// hold it until then.
type claimDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
	at     time.Time
}

// at returns the deadline of a claim that starts at now.
func (d *claimDeadlines) at(now time.Time) context.Context {
	least := d.timeout - d.timeout/8
	if c := d.cur.Load(); c != nil && c.at.Sub(now) > least {
		return c.ctx
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.cur.Load(); c != nil && c.at.Sub(now) > least {
		return c.ctx
	}
	c := &claimDeadline{at: now.Add(d.timeout)}
	c.ctx, c.cancel = context.WithDeadline(context.Background(), c.at)
	d.cur.Store(c)
	return c.ctx
}

// Header values of writeClaimAccepted, shared by every answer: net/http
// only reads them.
var (
	headerJSON    = []string{"application/json"}
	headerNoStore = []string{"no-store"}
	headerTrue    = []string{"true"}
)

// writeClaimAccepted writes the 202 of an accepted claim: the bytes
// writeJSON writes for out, encoded without reflection into w's scratch
// space.
func writeClaimAccepted(w http.ResponseWriter, out api.Claimed) {
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["Cache-Control"] = headerNoStore
	w.WriteHeader(http.StatusAccepted)
	b := append(scratchOf(w), `{"status":`...)
	b = jsontext.AppendString(b, out.Status)
	b = append(b, `,"claim_id":`...)
	b = jsontext.AppendString(b, out.ClaimID)
	b = append(b, `,"rank":`...)
	b = strconv.AppendInt(b, out.Rank, 10)
	b = append(b, "}\n"...)
	_, _ = w.Write(b)
}

// toUserClaim is c as the API shows it, with what it received once issued:
// a coupon's or voucher's code and value, a voucher's expiry, or the
// points a point claim credited (as value).
func toUserClaim(c promotion.UserClaim) api.UserClaim {
	o := api.UserClaim{ClaimID: c.ClaimID, Rank: c.Rank, Status: c.Status, IssuedAt: optTime(c.IssuedAt)}
	g := c.Grant
	o.Code = g.Code
	switch {
	case g.Code != "":
		o.Value = &g.Value
	case g.Points != 0:
		o.Value = &g.Points
	}
	o.ExpiresAt = optTime(g.ExpiresAt)
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
	out := api.UserClaims{Status: summaryStatus(cs), Claims: make([]api.UserClaim, 0, len(cs))}
	for _, c := range cs {
		out.Claims = append(out.Claims, toUserClaim(c))
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
