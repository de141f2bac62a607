package client

import (
	"context"
	"errors"

	"github.com/dibsio/dibs/api"
)

// maxJoinTries bounds JoinQueueSolving: a challenge refused again (its
// difficulty raised meanwhile, or it expired) is solved anew this often.
const maxJoinTries = 3

// SolveChallenge finds a nonce such that SHA-256(challenge + ":" + nonce)
// starts with difficulty zero bits (the first byte's most significant bit
// first): decimal counters from 0, about 2^difficulty hashes on one core.
// It gives up with ctx's error. It is api.SolveChallenge, the rule the
// server checks.
func SolveChallenge(ctx context.Context, challenge string, difficulty int) (string, error) {
	return api.SolveChallenge(ctx, challenge, difficulty)
}

// JoinQueueSolving is JoinQueue that answers the room's proof-of-work
// challenges: on challenge_required it solves the challenge and joins again,
// up to three times.
func (c *Client) JoinQueueSolving(ctx context.Context, promotion, userID string) (*QueueStanding, error) {
	var proof []Proof
	for range maxJoinTries {
		st, err := c.JoinQueue(ctx, promotion, userID, proof...)
		var p *Problem
		if !errors.As(err, &p) || p.Code != CodeChallengeRequired || p.Challenge == "" {
			return st, err
		}
		nonce, serr := SolveChallenge(ctx, p.Challenge, p.Difficulty)
		if serr != nil {
			return nil, serr
		}
		proof = []Proof{{Challenge: p.Challenge, Nonce: nonce}}
	}
	return c.JoinQueue(ctx, promotion, userID, proof...)
}
