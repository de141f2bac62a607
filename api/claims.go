package api

import "time"

// UserRef is the body of a claim (POST /v1/promotions/{id}/claims): the
// user claiming. Empty with user tokens on: the token's user.
type UserRef struct {
	UserID string `json:"user_id,omitempty"`
}

// Claimed is the answer of an accepted claim (202): the user holds the
// Rank-th unit; its confirmation into the database follows.
type Claimed struct {
	// Status is always "pending".
	Status  string `json:"status"`
	ClaimID string `json:"claim_id"`
	Rank    int64  `json:"rank"`
}

// UserClaims is a user's standing in a promotion (GET
// /v1/promotions/{id}/claims/{user_id}).
type UserClaims struct {
	// Status is the user's overall status: "none", "pending", "issued",
	// "failed" or "revoked".
	Status string      `json:"status"`
	Claims []UserClaim `json:"claims"`
}

// UserClaim is one of a user's claims. Code, Value and ExpiresAt are set
// once it is issued, for the kinds that hand them out: a coupon's or
// voucher's code and value, a voucher's expiry, or the points a point claim
// credited (as Value).
type UserClaim struct {
	ClaimID   string     `json:"claim_id"`
	Rank      int64      `json:"rank"`
	Status    string     `json:"status"`
	IssuedAt  *time.Time `json:"issued_at"`
	Code      string     `json:"code,omitempty"`
	Value     *int64     `json:"value,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// ClaimLookup is the answer of GET /v1/claims/{claim_id}: one claim found
// by its id, with its promotion and user.
type ClaimLookup struct {
	PromotionID string    `json:"promotion_id"`
	UserID      string    `json:"user_id"`
	Claim       UserClaim `json:"claim"`
}

// ClaimIDs is a body naming claims, all or nothing on validation (POST
// …/claims/revoke, …/dead-letters/void).
type ClaimIDs struct {
	ClaimIDs []string `json:"claim_ids"`
}

// Revoked is the answer of POST /v1/promotions/{id}/claims/revoke: Skipped
// names the ids not revoked now (unknown, not issued, another promotion's,
// revoked already); Pending the revoked claims whose issuer's undo has not
// gone through yet (it is retried in the background); Refused those whose
// webhook refused the undo for good.
type Revoked struct {
	Revoked int           `json:"revoked"`
	Skipped []string      `json:"skipped"`
	Pending []string      `json:"pending"`
	Refused []RefusedUndo `json:"refused"`
}

// RefusedUndo is a revoked claim whose webhook refused the undo: it stays
// revoked, and the undo is not tried again. Reason holds the refusal (URL,
// status, start of the answer).
type RefusedUndo struct {
	ClaimID string `json:"claim_id"`
	Reason  string `json:"reason"`
}

// Winner is an issued claim in a promotion's winners list (GET
// /v1/promotions/{id}/claims?status=issued).
type Winner struct {
	Rank       int64     `json:"rank"`
	ClaimID    string    `json:"claim_id"`
	UserID     string    `json:"user_id"`
	Slot       int       `json:"slot"`
	AcceptedAt time.Time `json:"accepted_at"`
	IssuedAt   time.Time `json:"issued_at"`
	// Code is the claim's coupon or voucher code, left out for kinds
	// without one.
	Code string `json:"code,omitempty"`
}

// WinnerPage is one page of the winners list, in rank order.
type WinnerPage struct {
	Claims     []Winner `json:"claims"`
	NextCursor *string  `json:"next_cursor"`
}
