package client

import (
	"context"
	"iter"
	"net/http"

	"github.com/dibsio/dibs/api"
)

// The shapes of dead letters, as the server writes them (see package api).
type (
	// DeadLetter is a claim the confirmation gave up on.
	DeadLetter = api.DeadLetter
	// DeadLetterPage is one page of ListDeadLetters.
	DeadLetterPage = api.DeadLetterPage
)

// ListDeadLetters reads one page of a promotion's dead letters (admin).
func (c *Client) ListDeadLetters(ctx context.Context, promotion string, page PageOptions) (*DeadLetterPage, error) {
	var out DeadLetterPage
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("promotions", promotion, "dead-letters"), query: page.query()}, &out)
}

// DeadLetters iterates over every dead letter of a promotion (admin).
func (c *Client) DeadLetters(ctx context.Context, promotion string) iter.Seq2[DeadLetter, error] {
	return all(func(o PageOptions) (*DeadLetterPage, error) { return c.ListDeadLetters(ctx, promotion, o) }, deadLetterItems)
}

// ReplayDeadLetters puts the named dead letters back into the pipeline under
// the same claim ids (admin); nil claimIDs replays them all. It returns how
// many were replayed.
func (c *Client) ReplayDeadLetters(ctx context.Context, promotion string, claimIDs []string, opts ...RequestOption) (int, error) {
	body, err := jsonBody(api.ReplayRequest{ClaimIDs: claimIDs, All: claimIDs == nil})
	if err != nil {
		return 0, err
	}
	var out api.Replayed
	err = c.do(ctx, request{method: http.MethodPost, path: path("promotions", promotion, "dead-letters", "replay"), body: body, opts: opts}, &out)
	return out.Replayed, err
}

// VoidDeadLetters gives up on the named dead letters and returns their units
// to stock (admin). It returns how many were voided.
func (c *Client) VoidDeadLetters(ctx context.Context, promotion string, claimIDs []string, opts ...RequestOption) (int, error) {
	body, err := jsonBody(api.ClaimIDs{ClaimIDs: claimIDs})
	if err != nil {
		return 0, err
	}
	var out api.Voided
	err = c.do(ctx, request{method: http.MethodPost, path: path("promotions", promotion, "dead-letters", "void"), body: body, opts: opts}, &out)
	return out.Voided, err
}
