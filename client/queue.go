package client

import (
	"context"
	"net/http"

	"github.com/dibsio/dibs/api"
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
type QueueStanding = api.QueueStanding

// Proof is a solved proof-of-work challenge: the Challenge of a
// challenge_required Problem, as it came, and a Nonce found by
// SolveChallenge.
type Proof struct {
	Challenge string
	Nonce     string
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
	in := api.JoinRequest{UserID: userID}
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
