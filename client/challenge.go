package client

import (
	"context"
	"crypto/sha256"
	"errors"
	"math/bits"
	"strconv"
)

// maxJoinTries bounds JoinQueueSolving: a challenge refused again (its
// difficulty raised meanwhile, or it expired) is solved anew this often.
const maxJoinTries = 3

// SolveChallenge finds a nonce such that SHA-256(challenge + ":" + nonce)
// starts with difficulty zero bits (the first byte's most significant bit
// first): decimal counters from 0, about 2^difficulty hashes on one core.
// It gives up with ctx's error.
func SolveChallenge(ctx context.Context, challenge string, difficulty int) (string, error) {
	buf := make([]byte, 0, len(challenge)+21)
	buf = append(append(buf, challenge...), ':')
	head := len(buf)
	for n := uint64(0); ; n++ {
		if n&0xffff == 0 && ctx.Err() != nil {
			return "", ctx.Err()
		}
		buf = strconv.AppendUint(buf[:head], n, 10)
		if sum := sha256.Sum256(buf); zeroBits(sum[:]) >= difficulty {
			return string(buf[head:]), nil
		}
	}
}

// zeroBits counts the leading zero bits of b.
func zeroBits(b []byte) int {
	n := 0
	for _, x := range b {
		if x != 0 {
			return n + bits.LeadingZeros8(x)
		}
		n += 8
	}
	return n
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
