package client

import (
	"context"
	"io"
	"iter"
	"net/http"

	"github.com/dibsio/dibs/api"
)

// Claim statuses: of a user (UserClaims.Status) and of one claim.
const (
	StatusNone    = "none"
	StatusPending = "pending"
	StatusIssued  = "issued"
	StatusFailed  = "failed"
	StatusVoided  = "voided"
	StatusRevoked = "revoked"
)

// The shapes of claims, as the server writes and reads them (see package
// api).
type (
	// Claimed is an accepted claim: the user holds the Rank-th unit; its
	// confirmation into the database follows.
	Claimed = api.Claimed
	// UserClaims is a user's standing in a promotion.
	UserClaims = api.UserClaims
	// UserClaim is one of a user's claims. Code, Value and ExpiresAt are
	// set once it is issued, for the kinds that hand them out.
	UserClaim = api.UserClaim
	// Revoked is the answer of RevokeClaims: Skipped names the ids not
	// revoked now (unknown, not issued, another promotion's, revoked
	// already); Pending the revoked claims whose issuer's undo has not gone
	// through yet (it is retried in the background); Refused those whose
	// webhook refused the undo for good.
	Revoked = api.Revoked
	// RefusedUndo is a revoked claim whose webhook refused the undo: it
	// stays revoked, and the undo is not tried again. Reason holds the
	// refusal (URL, status, start of the answer).
	RefusedUndo = api.RefusedUndo
	// Winner is an issued claim in a promotion's winners list.
	Winner = api.Winner
	// WinnerPage is one page of ListWinners.
	WinnerPage = api.WinnerPage
)

// Claim claims a unit of promotion for userID (empty: the user of the user
// token). Pass IdempotencyKey to make a retry safe and EntryToken on a
// promotion with a waiting room. A refusal (sold_out, already_claimed, ...)
// is a *Problem.
func (c *Client) Claim(ctx context.Context, promotion, userID string, opts ...RequestOption) (*Claimed, error) {
	body, err := jsonBody(api.UserRef{UserID: userID})
	if err != nil {
		return nil, err
	}
	var out Claimed
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("promotions", promotion, "claims"), auth: authUser, body: body, opts: opts}, &out)
}

// ClaimStatus reads userID's claims in promotion.
func (c *Client) ClaimStatus(ctx context.Context, promotion, userID string) (*UserClaims, error) {
	var out UserClaims
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("promotions", promotion, "claims", userID), auth: authUser}, &out)
}

// RevokeClaims revokes issued claims (admin; 1..1,000 ids).
func (c *Client) RevokeClaims(ctx context.Context, promotion string, claimIDs []string, opts ...RequestOption) (*Revoked, error) {
	body, err := jsonBody(api.ClaimIDs{ClaimIDs: claimIDs})
	if err != nil {
		return nil, err
	}
	var out Revoked
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("promotions", promotion, "claims", "revoke"), body: body, opts: opts}, &out)
}

// ListWinners reads one page of a promotion's issued claims in rank order
// (admin).
func (c *Client) ListWinners(ctx context.Context, promotion string, page PageOptions) (*WinnerPage, error) {
	q := page.query()
	q.Set("status", StatusIssued)
	var out WinnerPage
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("promotions", promotion, "claims"), query: q}, &out)
}

// Winners iterates over every issued claim of a promotion in rank order
// (admin).
func (c *Client) Winners(ctx context.Context, promotion string) iter.Seq2[Winner, error] {
	return all(func(o PageOptions) (*WinnerPage, error) { return c.ListWinners(ctx, promotion, o) }, winnerItems)
}

// WinnersCSV streams every issued claim of a promotion as CSV (admin): a
// header row rank,claim_id,user_id,slot,accepted_at,issued_at,code, then a
// row per claim. The caller closes the reader.
func (c *Client) WinnersCSV(ctx context.Context, promotion string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: path("promotions", promotion, "claims"), accept: "text/csv"})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
