package client

import (
	"context"
	"iter"
	"net/http"
	"time"
)

// DeadLetter is a claim the confirmation gave up on.
type DeadLetter struct {
	ClaimID    string    `json:"claim_id"`
	UserID     string    `json:"user_id"`
	Reason     string    `json:"reason"`
	Deliveries int64     `json:"deliveries"`
	At         time.Time `json:"at"`
}

// DeadLetterPage is one page of ListDeadLetters.
type DeadLetterPage struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
	NextCursor  *string      `json:"next_cursor"`
}

// ListDeadLetters reads one page of a promotion's dead letters (admin).
func (c *Client) ListDeadLetters(ctx context.Context, promotion string, page PageOptions) (*DeadLetterPage, error) {
	var out DeadLetterPage
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("promotions", promotion, "dead-letters"), query: page.query()}, &out)
}

// DeadLetters iterates over every dead letter of a promotion (admin).
func (c *Client) DeadLetters(ctx context.Context, promotion string) iter.Seq2[DeadLetter, error] {
	return all[DeadLetter](func(o PageOptions) (*DeadLetterPage, error) { return c.ListDeadLetters(ctx, promotion, o) })
}

// ReplayDeadLetters puts the named dead letters back into the pipeline under
// the same claim ids (admin); nil claimIDs replays them all. It returns how
// many were replayed.
func (c *Client) ReplayDeadLetters(ctx context.Context, promotion string, claimIDs []string, opts ...RequestOption) (int, error) {
	body, err := jsonBody(claimIDsBody{ClaimIDs: claimIDs, All: claimIDs == nil})
	if err != nil {
		return 0, err
	}
	var out struct {
		Replayed int `json:"replayed"`
	}
	err = c.do(ctx, request{method: http.MethodPost, path: path("promotions", promotion, "dead-letters", "replay"), body: body, opts: opts}, &out)
	return out.Replayed, err
}

// VoidDeadLetters gives up on the named dead letters and returns their units
// to stock (admin). It returns how many were voided.
func (c *Client) VoidDeadLetters(ctx context.Context, promotion string, claimIDs []string, opts ...RequestOption) (int, error) {
	body, err := jsonBody(claimIDsBody{ClaimIDs: claimIDs})
	if err != nil {
		return 0, err
	}
	var out struct {
		Voided int `json:"voided"`
	}
	err = c.do(ctx, request{method: http.MethodPost, path: path("promotions", promotion, "dead-letters", "void"), body: body, opts: opts}, &out)
	return out.Voided, err
}
