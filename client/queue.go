package client

import (
	"context"
	"net/http"
	"time"
)

// Waiting-room statuses.
const (
	QueueWaiting   = "waiting"
	QueuePrequeue  = "prequeue"
	QueueAdmitted  = "admitted"
	QueueUsed      = "used"
	QueueExpired   = "expired"
	QueueAbandoned = "abandoned"
	QueueSoldOut   = "sold_out"
	QueueEnded     = "ended"
)

// QueueStanding is a user's standing in a waiting room. The pointer fields
// are set only where they apply: the position and estimates while waiting,
// the entry token once admitted, the shuffle time in the prequeue.
type QueueStanding struct {
	Status                    string     `json:"status"`
	Position                  *int64     `json:"position,omitempty"`
	EstimatedWaitSeconds      *float64   `json:"estimated_wait_seconds,omitempty"`
	EstimatedWaitRangeSeconds []float64  `json:"estimated_wait_range_seconds,omitempty"`
	StockExpectedToLast       *bool      `json:"stock_expected_to_last,omitempty"`
	PollAfterMS               *int64     `json:"poll_after_ms,omitempty"`
	EntryToken                string     `json:"entry_token,omitempty"`
	ExpiresAt                 *time.Time `json:"expires_at,omitempty"`
	ShuffleAt                 *time.Time `json:"shuffle_at,omitempty"`
	// Paused tells waiting, prequeue and admitted users whether the
	// promotion is paused: while it is, nobody is let in and no claim is
	// taken, and the estimated wait counts from the resume.
	Paused *bool `json:"paused,omitempty"`
	// Message is the room's message to everyone in line; "" for none.
	Message string `json:"message,omitempty"`
}

// Proof is a solved proof-of-work challenge: the Challenge of a
// challenge_required Problem, as it came, and a Nonce found by
// SolveChallenge.
type Proof struct {
	Challenge string
	Nonce     string
}

type joinBody struct {
	UserID    string `json:"user_id,omitempty"`
	Challenge string `json:"challenge,omitempty"`
	Nonce     string `json:"nonce,omitempty"`
}

// JoinQueue puts userID (empty: the user of the user token) in line for a
// promotion with a waiting room; joining again keeps the place. A user
// whose pass was spent (QueueUsed) takes a new place at the back while the
// user's claims are below the promotion's per_user_limit, and is answered
// QueueUsed at the limit.
//
// A room that asks for a proof of work answers a join without a valid
// one with a *Problem of code CodeChallengeRequired: solve its Challenge
// (SolveChallenge) and join again with the Proof (at most one is sent).
// JoinQueueSolving does both.
func (c *Client) JoinQueue(ctx context.Context, promotion, userID string, proof ...Proof) (*QueueStanding, error) {
	in := joinBody{UserID: userID}
	if len(proof) > 0 {
		in.Challenge, in.Nonce = proof[0].Challenge, proof[0].Nonce
	}
	body, err := jsonBody(in)
	if err != nil {
		return nil, err
	}
	var out QueueStanding
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("promotions", promotion, "queue"), auth: authUser, body: body}, &out)
}

// QueueStatus reads userID's standing in a waiting room; it counts as the
// user's check-in.
func (c *Client) QueueStatus(ctx context.Context, promotion, userID string) (*QueueStanding, error) {
	var out QueueStanding
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("promotions", promotion, "queue", userID), auth: authUser}, &out)
}
