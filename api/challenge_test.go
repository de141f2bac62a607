package api

import (
	"context"
	"crypto/sha256"
	"testing"
)

// TestLeadingZeros counts bits across bytes.
func TestLeadingZeros(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		want int
	}{{[]byte{0x80}, 0}, {[]byte{0x01}, 7}, {[]byte{0, 0x7f}, 9}, {[]byte{0, 0, 0x10}, 19}, {[]byte{0, 0}, 16}} {
		if got := leadingZeros(c.b); got != c.want {
			t.Errorf("leadingZeros(%x) = %d, want %d", c.b, got, c.want)
		}
	}
	// The rule written out: SHA-256 of the challenge, a colon and the nonce.
	sum := sha256.Sum256([]byte("abc:17"))
	if Solved("abc", "17", leadingZeros(sum[:])+1) || !Solved("abc", "17", leadingZeros(sum[:])) {
		t.Fatal("Solved disagrees with SHA-256(challenge + \":\" + nonce)")
	}
}

// TestSolveChallenge: the nonce found solves the challenge, and a context
// that ended stops the search.
func TestSolveChallenge(t *testing.T) {
	nonce, err := SolveChallenge(context.Background(), "some-challenge", 10)
	if err != nil || !Solved("some-challenge", nonce, 10) {
		t.Fatalf("SolveChallenge: %q, %v; does not solve it", nonce, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SolveChallenge(ctx, "some-challenge", 64); err == nil {
		t.Fatal("SolveChallenge went on after its context ended")
	}
}
