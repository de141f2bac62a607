package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/dibsio/dibs/internal/jsontext"
	"github.com/dibsio/dibs/promotion"
)

// Problem codes; the HTTP status is fixed per code.
const (
	CodeInvalidRequest = "invalid_request"
	CodeUnauthorized   = "unauthorized"
	CodeNotFound       = "not_found"
	CodeAlreadyExists  = "already_exists"
	CodeAlreadyClaimed = "already_claimed"
	CodeNotStarted     = "not_started"
	CodeEnded          = "ended"
	CodeNotAdmitted    = "not_admitted"
	CodeSoldOut        = "sold_out"
	CodeTooLarge       = "too_large"
	CodeOverloaded     = "overloaded"
	CodeUnavailable    = "unavailable"
	CodeMethod         = "method_not_allowed"
	// CodeClaimVoided: a claim retried with its Idempotency-Key was
	// accepted once, then voided by an admin: it holds no unit any more.
	CodeClaimVoided = "claim_voided"
	// CodeIdempotencyKeyReused: an admin request reused an Idempotency-Key
	// sent before with another method, path or body.
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	// CodeRequestInProgress: an admin request with this Idempotency-Key is
	// still running.
	CodeRequestInProgress = "request_in_progress"
	// CodeRebuildInProgress: a rebuild of the promotion runs already, in
	// this instance or another.
	CodeRebuildInProgress = "rebuild_in_progress"
	// CodeNotEnded: the call needs an ended promotion (archiving one still
	// scheduled or open).
	CodeNotEnded = "not_ended"
	// CodeNoPoolForKind: codes were uploaded for a promotion whose kind
	// takes no code pool (only coupon promotions do).
	CodeNoPoolForKind = "no_pool_for_kind"
	// CodePoolAfterStart: the first codes were uploaded after the
	// promotion started.
	CodePoolAfterStart = "pool_after_start"
	// CodePaused: an admin paused the promotion's claims; carries
	// Retry-After.
	CodePaused = "paused"
	// CodeStockBelowAccepted: a change would set the stock below the claims
	// accepted already; nothing was changed.
	CodeStockBelowAccepted = "stock_below_accepted"
	// CodeNotEnoughCodes: a change would raise the stock of a promotion
	// with a code pool above the codes in its pool; nothing was changed.
	CodeNotEnoughCodes = "not_enough_codes"
	// CodeForbidden: a dashboard request that changes something came
	// without the dashboard's Origin or its CSRF token.
	CodeForbidden = "forbidden"
	// CodeChallengeRequired: a join of a waiting room that asks for a
	// proof of work came without a valid solution; the problem carries a
	// fresh challenge.
	CodeChallengeRequired = "challenge_required"
)

var codeStatus = map[string]int{
	CodeInvalidRequest:     http.StatusBadRequest,
	CodeUnauthorized:       http.StatusUnauthorized,
	CodeNotFound:           http.StatusNotFound,
	CodeAlreadyExists:      http.StatusConflict,
	CodeAlreadyClaimed:     http.StatusConflict,
	CodeRebuildInProgress:  http.StatusConflict,
	CodeNotEnded:           http.StatusConflict,
	CodePaused:             http.StatusConflict,
	CodeStockBelowAccepted: http.StatusConflict,
	CodeNotEnoughCodes:     http.StatusConflict,
	CodeNotStarted:         http.StatusForbidden,
	CodeEnded:              http.StatusForbidden,
	CodeNotAdmitted:        http.StatusForbidden,
	CodeSoldOut:            http.StatusGone,
	CodeTooLarge:           http.StatusRequestEntityTooLarge,
	CodeOverloaded:         http.StatusServiceUnavailable,
	CodeUnavailable:        http.StatusServiceUnavailable,
	CodeMethod:             http.StatusMethodNotAllowed,
	CodeClaimVoided:        http.StatusGone,

	CodeIdempotencyKeyReused: http.StatusUnprocessableEntity,
	CodeRequestInProgress:    http.StatusConflict,
	CodeNoPoolForKind:        http.StatusConflict,
	CodePoolAfterStart:       http.StatusConflict,
	CodeForbidden:            http.StatusForbidden,
	CodeChallengeRequired:    http.StatusForbidden,
}

var codeTitle = map[string]string{
	CodeInvalidRequest:     "Invalid request",
	CodeUnauthorized:       "Unauthorized",
	CodeNotFound:           "Not found",
	CodeAlreadyExists:      "Already exists",
	CodeAlreadyClaimed:     "Already claimed",
	CodeNotStarted:         "Not started",
	CodeEnded:              "Ended",
	CodeNotAdmitted:        "Not admitted",
	CodeSoldOut:            "Sold out",
	CodeTooLarge:           "Request too large",
	CodeOverloaded:         "Overloaded",
	CodeUnavailable:        "Service unavailable",
	CodeMethod:             "Method not allowed",
	CodeNotEnded:           "Not ended",
	CodeNoPoolForKind:      "No code pool for this kind",
	CodePoolAfterStart:     "Code pool after the start",
	CodePaused:             "Paused",
	CodeStockBelowAccepted: "Stock below accepted",
	CodeNotEnoughCodes:     "Not enough codes",

	CodeIdempotencyKeyReused: "Idempotency key reused",
	CodeRequestInProgress:    "Request in progress",
	CodeForbidden:            "Forbidden",
	CodeChallengeRequired:    "Challenge required",
}

// Problem is an RFC 9457 problem document with dibs's code member.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Code     string `json:"code"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Field names the request field at fault, for invalid_request.
	Field string `json:"field,omitempty"`
	// RequestID is the id of the request (an extension member, RFC 9457
	// section 3.2), the X-Request-Id it was answered with; its log lines
	// carry it as request_id.
	RequestID string `json:"request_id,omitempty"`
	// Challenge, Difficulty and ChallengeExpiresAt are the fresh
	// proof-of-work challenge of challenge_required: find a nonce such that
	// SHA-256(challenge + ":" + nonce) starts with difficulty zero bits and
	// join again with both before the challenge expires.
	Challenge          string  `json:"challenge,omitempty"`
	Difficulty         int     `json:"difficulty,omitempty"`
	ChallengeExpiresAt *string `json:"challenge_expires_at,omitempty"`

	retryAfter int // seconds; 0 for none
}

func problem(code, detail string) *Problem {
	st, ok := codeStatus[code]
	if !ok {
		st = http.StatusInternalServerError
	}
	return &Problem{Type: "about:blank", Title: codeTitle[code], Status: st, Code: code, Detail: detail}
}

func (p *Problem) withField(f string) *Problem { p.Field = f; return p }

func (p *Problem) retry(seconds int) *Problem { p.retryAfter = seconds; return p }

func (p *Problem) write(w http.ResponseWriter, r *http.Request) {
	if p.Instance == "" && r != nil {
		p.Instance = r.URL.Path
	}
	if p.RequestID == "" && r != nil {
		p.RequestID = RequestID(r.Context())
	}
	h := w.Header()
	h["Content-Type"] = headerProblemJSON
	h["Cache-Control"] = headerNoStore
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	if p.Code == CodeUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="dibs"`)
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(p.appendJSON(scratchOf(w)))
}

// headerProblemJSON is the Content-Type of every problem; net/http only
// reads it.
var headerProblemJSON = []string{"application/problem+json"}

// appendJSON appends p as json.Encoder encodes it (the newline included),
// without reflection: a refused claim is answered for the cost of its
// bytes.
func (p *Problem) appendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = jsontext.AppendString(b, p.Type)
	b = append(b, `,"title":`...)
	b = jsontext.AppendString(b, p.Title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	b = append(b, `,"code":`...)
	b = jsontext.AppendString(b, p.Code)
	for _, m := range [...]struct{ name, v string }{
		{`,"detail":`, p.Detail}, {`,"instance":`, p.Instance}, {`,"field":`, p.Field}, {`,"request_id":`, p.RequestID},
	} {
		if m.v != "" { // omitempty
			b = append(b, m.name...)
			b = jsontext.AppendString(b, m.v)
		}
	}
	if p.Challenge != "" {
		b = append(b, `,"challenge":`...)
		b = jsontext.AppendString(b, p.Challenge)
	}
	if p.Difficulty != 0 {
		b = append(b, `,"difficulty":`...)
		b = strconv.AppendInt(b, int64(p.Difficulty), 10)
	}
	if p.ChallengeExpiresAt != nil {
		b = append(b, `,"challenge_expires_at":`...)
		b = jsontext.AppendString(b, *p.ChallengeExpiresAt)
	}
	return append(b, "}\n"...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// roomProblem maps the waiting room's outcomes (a join, a user's place in
// the queue, the prequeue) to their problems; nil for any other error.
func roomProblem(err error) *Problem {
	var ce *promotion.ChallengeError
	switch {
	case errors.As(err, &ce):
		return challengeProblem(ce)
	case errors.Is(err, promotion.ErrNotJoined):
		return problem(CodeNotFound, "this user has not joined the queue")
	case errors.Is(err, promotion.ErrRoomSoldOut):
		return problem(CodeSoldOut, "the stock is exhausted; nobody else is let in")
	case errors.Is(err, promotion.ErrRoomEnded):
		return problem(CodeEnded, "the promotion has ended")
	case errors.Is(err, promotion.ErrRoomNotFound):
		// This instance has not opened the promotion's waiting room in
		// Redis yet; a plain retry is safe.
		return problem(CodeUnavailable, "the waiting room is being prepared on this instance; retry shortly").retry(1)
	case errors.Is(err, promotion.ErrNoPrequeue):
		return problem(CodeNotFound, "this promotion has no prequeue: its places are in order of joining")
	case errors.Is(err, promotion.ErrNotShuffled):
		return problem(CodeUnavailable, "the prequeue is shuffled at the waiting room's first tick after starts_at; retry shortly").retry(1)
	}
	return nil
}

// poolProblem maps the code pool's refusals (an upload, a stock above the
// codes) to their problems; nil for any other error.
func poolProblem(err error) *Problem {
	var nec *promotion.NotEnoughCodesError
	switch {
	case errors.As(err, &nec):
		return problem(CodeNotEnoughCodes, fmt.Sprintf("the code pool holds %d codes, fewer than the stock %d: upload more codes first; nothing was changed", nec.Codes, nec.Stock)).withField("stock")
	case errors.Is(err, promotion.ErrNoPoolForKind):
		return problem(CodeNoPoolForKind, "only coupon promotions take uploaded codes")
	case errors.Is(err, promotion.ErrPoolAfterStart):
		return problem(CodePoolAfterStart, "the promotion has started without a code pool; its first codes must be uploaded before it starts")
	}
	return nil
}

// fail writes the problem for err.
func (s *failureLogs) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.problemFor(r, err).write(w, r)
}

// problemFor maps err to its problem: knownProblem's, else unexpected's.
func (s *failureLogs) problemFor(r *http.Request, err error) *Problem {
	if pr := knownProblem(err); pr != nil {
		return pr
	}
	return s.unexpected(r, err)
}

// knownProblem maps the promotion package's sentinels (its one error
// vocabulary, the waiting room's and the code pool's among them: see
// roomProblem and poolProblem) to their problems; nil for any other error.
// Handlers switch on no other sentinel.
func knownProblem(err error) *Problem {
	var ve *promotion.ValidationError
	switch {
	case errors.As(err, &ve):
		return problem(CodeInvalidRequest, ve.Error()).withField(ve.Field)
	case errors.Is(err, promotion.ErrNotFound):
		return problem(CodeNotFound, "no such promotion")
	case errors.Is(err, promotion.ErrNotEnded):
		return problem(CodeNotEnded, "the promotion has not ended: close it first")
	case errors.Is(err, promotion.ErrBadQuery):
		return problem(CodeInvalidRequest, err.Error())
	case errors.Is(err, promotion.ErrAlreadyExists):
		return problem(CodeAlreadyExists, "a promotion with this id exists")
	case errors.Is(err, promotion.ErrWrongMode):
		return problem(CodeInvalidRequest, "this promotion's mode does not allow this call")
	case errors.Is(err, promotion.ErrAlreadyClaimed):
		return problem(CodeAlreadyClaimed, "the user reached the promotion's per-user limit")
	case errors.Is(err, promotion.ErrNotStarted):
		return problem(CodeNotStarted, "the promotion has not started")
	case errors.Is(err, promotion.ErrEnded):
		return problem(CodeEnded, "the promotion has ended")
	case errors.Is(err, promotion.ErrSoldOut):
		return problem(CodeSoldOut, "the stock is exhausted")
	case errors.Is(err, promotion.ErrNotAdmitted):
		return problem(CodeNotAdmitted, "the promotion has a waiting room and the request carries no valid entry token of this user (X-Entry-Token): join the queue and claim once admitted")
	case errors.Is(err, promotion.ErrVoided):
		return problem(CodeClaimVoided, "this claim was accepted, then voided by an admin: it holds no unit any more")
	case errors.Is(err, promotion.ErrPaused):
		return problem(CodePaused, "an admin paused this promotion's claims; retry later").retry(PausedRetryAfter)
	case errors.Is(err, promotion.ErrStockBelowAccepted):
		return problem(CodeStockBelowAccepted, "the stock cannot go below the claims accepted already; nothing was changed").withField("stock")
	case errors.Is(err, promotion.ErrChangeBusy):
		return problem(CodeRequestInProgress, "another change of this promotion is being applied; retry shortly").retry(1)
	case errors.Is(err, promotion.ErrDrained):
		return problem(CodeEnded, "the promotion ended and every claim of it is settled: its end can no longer move").withField("ends_at")
	case errors.Is(err, promotion.ErrRebuildBusy):
		return problem(CodeRebuildInProgress, "a rebuild of this promotion is running; retry once it is done").retry(1)
	case errors.Is(err, promotion.ErrRebuilding):
		// Redis lost writes and the promotion's counters are being rebuilt
		// from the database; nothing was taken, so a plain retry is safe.
		return problem(CodeUnavailable, "the promotion is rebuilding from the database; retry shortly").retry(1)
	case errors.Is(err, promotion.ErrNotReady):
		// This instance is still opening the promotion in Redis; nothing
		// was taken, so a plain retry is safe.
		return problem(CodeUnavailable, "the promotion is being prepared on this instance; retry shortly").retry(1)
	}
	if pr := roomProblem(err); pr != nil {
		return pr
	}
	return poolProblem(err)
}
