package client

import (
	"fmt"
	"time"
)

// The problem codes of the contract (docs/contract.md). Switch on
// Problem.Code, not on the status alone.
const (
	CodeInvalidRequest       = "invalid_request"
	CodeUnauthorized         = "unauthorized"
	CodeForbidden            = "forbidden"
	CodeNotFound             = "not_found"
	CodeAlreadyExists        = "already_exists"
	CodeAlreadyClaimed       = "already_claimed"
	CodeRebuildInProgress    = "rebuild_in_progress"
	CodeNotEnded             = "not_ended"
	CodePaused               = "paused"
	CodeStockBelowAccepted   = "stock_below_accepted"
	CodeRequestInProgress    = "request_in_progress"
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodeNotStarted           = "not_started"
	CodeEnded                = "ended"
	CodeNotAdmitted          = "not_admitted"
	CodeSoldOut              = "sold_out"
	CodeClaimVoided          = "claim_voided"
	CodeTooLarge             = "too_large"
	CodeOverloaded           = "overloaded"
	CodeUnavailable          = "unavailable"
	CodePoolAfterStart       = "pool_after_start"
	CodeNoPoolForKind        = "no_pool_for_kind"
	CodeNotEnoughCodes       = "not_enough_codes"
	// CodeChallengeRequired: a join of a waiting room that asks for a
	// proof of work came without a valid solution; the problem's Challenge
	// and Difficulty are a fresh challenge to solve (SolveChallenge).
	CodeChallengeRequired = "challenge_required"
)

// Problem is an answer of the server that says no: an RFC 9457 problem
// document with dibs's code. Get it from an error with errors.As.
type Problem struct {
	// Type is the problem type URI ("about:blank").
	Type string `json:"type"`
	// Title is the code's short human title.
	Title string `json:"title"`
	// Status is the HTTP status of the answer.
	Status int `json:"status"`
	// Code is one of the Code constants; empty when the answer was not a
	// problem document (a proxy's error page, say).
	Code string `json:"code"`
	// Detail says what went wrong with this request.
	Detail string `json:"detail,omitempty"`
	// Instance identifies the occurrence, when the server gives one.
	Instance string `json:"instance,omitempty"`
	// Field names the request field at fault (invalid_request).
	Field string `json:"field,omitempty"`
	// RequestID is the id the server answered the request under (the
	// problem's request_id, else the X-Request-Id header): the server's
	// log lines of the request carry it. Empty if the answer had none.
	RequestID string `json:"request_id,omitempty"`
	// RetryAfter is the answer's Retry-After; 0 without one.
	RetryAfter time.Duration `json:"-"`
	// Challenge is the fresh proof-of-work challenge of
	// challenge_required; Difficulty the leading zero bits its solution's
	// hash must have, ChallengeExpiresAt when it stops being accepted.
	Challenge          string     `json:"challenge,omitempty"`
	Difficulty         int        `json:"difficulty,omitempty"`
	ChallengeExpiresAt *time.Time `json:"challenge_expires_at,omitempty"`
}

// Error implements error: "code: detail" (the title without a detail, the
// status without a code).
func (p *Problem) Error() string {
	code := p.Code
	if code == "" {
		code = fmt.Sprintf("HTTP %d", p.Status)
	}
	detail := p.Detail
	if detail == "" {
		detail = p.Title
	}
	if p.Field != "" {
		detail += " (field " + p.Field + ")"
	}
	if detail == "" {
		return code
	}
	return code + ": " + detail
}
