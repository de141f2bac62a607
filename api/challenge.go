package api

import (
	"context"
	"crypto/sha256"
	"math/bits"
	"strconv"
)

// The proof of work a waiting room may ask of a join (docs/contract.md,
// challenge_required) is one rule on both sides of the API: the server
// checks a nonce with Solved, a client finds one with SolveChallenge.

// Solved reports whether SHA-256(challenge + ":" + nonce) starts with at
// least difficulty zero bits (the first byte's most significant bit
// first).
func Solved(challenge, nonce string, difficulty int) bool {
	h := sha256.New()
	h.Write([]byte(challenge))
	h.Write([]byte{':'})
	h.Write([]byte(nonce))
	var sum [sha256.Size]byte
	return leadingZeros(h.Sum(sum[:0])) >= difficulty
}

// SolveChallenge finds a nonce that solves challenge at difficulty (see
// Solved): decimal counters from 0, about 2^difficulty hashes on one core.
// It gives up with ctx's error.
func SolveChallenge(ctx context.Context, challenge string, difficulty int) (string, error) {
	buf := make([]byte, 0, len(challenge)+1+20)
	buf = append(append(buf, challenge...), ':')
	head := len(buf)
	for n := uint64(0); ; n++ {
		if n&0xffff == 0 && ctx.Err() != nil {
			return "", ctx.Err()
		}
		buf = strconv.AppendUint(buf[:head], n, 10)
		if sum := sha256.Sum256(buf); leadingZeros(sum[:]) >= difficulty {
			return string(buf[head:]), nil
		}
	}
}

// leadingZeros counts the leading zero bits of b.
func leadingZeros(b []byte) int {
	n := 0
	for _, x := range b {
		if x != 0 {
			return n + bits.LeadingZeros8(x)
		}
		n += 8
	}
	return n
}
