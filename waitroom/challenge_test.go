package waitroom

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// solve solves a challenge in a test.
func solve(t *testing.T, challenge string, difficulty int) string {
	t.Helper()
	nonce, err := Solve(context.Background(), challenge, difficulty)
	if err != nil {
		t.Fatal(err)
	}
	if !Solved(challenge, nonce, difficulty) {
		t.Fatalf("Solve gave %q, which does not solve it", nonce)
	}
	return nonce
}

// challenged asserts err is a *ChallengeError for reason at difficulty and
// returns it.
func challenged(t *testing.T, err error, reason error, difficulty int) *ChallengeError {
	t.Helper()
	var ce *ChallengeError
	if !errors.As(err, &ce) || !errors.Is(err, reason) || !errors.Is(err, ErrChallengeRequired) || ce.Difficulty != difficulty || ce.Challenge == "" {
		t.Fatalf("join: %v; want a challenge at %d for %v", err, difficulty, reason)
	}
	return ce
}

// TestCheckProof: a challenge is bound to its promotion and user, expires,
// and cannot be forged; a nonce must solve it.
func TestCheckProof(t *testing.T) {
	t.Parallel()
	s, err := NewSigner(testKeys...)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, c := s.NewChallenge("p", "u1", 6, now)
	if c.Difficulty != 6 || !c.ExpiresAt.After(now) {
		t.Fatalf("challenge %+v", c)
	}
	nonce := solve(t, tok, 6)
	if got, err := s.CheckProof("p", "u1", Proof{tok, nonce}, now); err != nil || got.ID != c.ID {
		t.Fatalf("valid proof: %+v, %v", got, err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	raw[len(raw)-1] ^= 1
	forged := base64.RawURLEncoding.EncodeToString(raw)
	other, _ := NewSigner(Key{ID: "k1", Secret: make([]byte, MinSecretLen)})
	alien, _ := other.NewChallenge("p", "u1", 0, now)
	for name, c := range map[string]struct {
		user  string
		proof Proof
		at    time.Time
		want  error
	}{
		"bad MAC":      {"u1", Proof{forged, nonce}, now, ErrProofForged},
		"other secret": {"u1", Proof{alien, "0"}, now, ErrProofForged},
		"garbage":      {"u1", Proof{"!!", "0"}, now, ErrProofForged},
		"wrong user":   {"u2", Proof{tok, nonce}, now, ErrProofNotYours},
		"expired":      {"u1", Proof{tok, nonce}, now.Add(ChallengeTTL), ErrProofExpired},
		"bad nonce":    {"u1", Proof{tok, nonce + ":"}, now, ErrProofUnsolved},
		"long nonce":   {"u1", Proof{tok, string(make([]byte, MaxNonceLen+1))}, now, ErrProofUnsolved},
	} {
		if _, err := s.CheckProof("p", c.user, c.proof, c.at); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	// A nonce that does not solve it: find one.
	for n := 0; ; n++ {
		nonce := string(rune('a'+n%26)) + string(rune('a'+n/26))
		if !Solved(tok, nonce, 6) {
			if _, err := s.CheckProof("p", "u1", Proof{tok, nonce}, now); !errors.Is(err, ErrProofUnsolved) {
				t.Fatalf("unsolved nonce: %v", err)
			}
			break
		}
	}
}

// TestJoinWithProof: a room with a difficulty takes a join with a valid
// solution once; refuses one without, a reused, a forged, an expired,
// another user's and one easier than the room asks (raised since), each
// with a fresh challenge at the room's difficulty; and once the difficulty
// is back to 0 it takes joins without.
func TestJoinWithProof(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 10)
		ctx := context.Background()
		now := time.Now()
		clock := &now
		rooms, err := New(f.c, Config{Prefix: f.prefix, Keys: testKeys, Now: func() time.Time { return *clock }})
		if err != nil {
			t.Fatal(err)
		}
		f.rooms = rooms
		f.open(t, Settings{AdmitPerSecond: 10, PowDifficulty: 4, OpensAt: later})

		_, err = rooms.Join(ctx, f.id, "u1")
		ce := challenged(t, err, ErrProofMissing, 4)
		proof := Proof{ce.Challenge, solve(t, ce.Challenge, 4)}
		st, err := rooms.JoinWithProof(ctx, f.id, "u1", proof, 0)
		if err != nil || st.Status != StatusWaiting || st.Place != 1 {
			t.Fatalf("valid proof: %+v, %v", st, err)
		}
		_, err = rooms.JoinWithProof(ctx, f.id, "u1", proof, 0)
		challenged(t, err, ErrProofSpent, 4)
		_, err = rooms.JoinWithProof(ctx, f.id, "u2", proof, 0)
		challenged(t, err, ErrProofNotYours, 4)
		raw, _ := base64.RawURLEncoding.DecodeString(ce.Challenge)
		raw[len(raw)-1] ^= 1
		forged := Proof{base64.RawURLEncoding.EncodeToString(raw), proof.Nonce}
		_, err = rooms.JoinWithProof(ctx, f.id, "u1", forged, 0)
		challenged(t, err, ErrProofForged, 4)

		// Expired: the clock moves past the challenge's life.
		_, err = rooms.Join(ctx, f.id, "u2")
		ce = challenged(t, err, ErrProofMissing, 4)
		late := now.Add(ChallengeTTL + time.Second)
		clock = &late
		_, err = rooms.JoinWithProof(ctx, f.id, "u2", Proof{ce.Challenge, solve(t, ce.Challenge, 4)}, 0)
		challenged(t, err, ErrProofExpired, 4)
		clock = &now

		// Too easy: the room's difficulty was raised after the challenge
		// was handed out; Redis refuses it even when the caller knew no
		// better, and the caller refuses it alone when it knows.
		_, err = rooms.Join(ctx, f.id, "u2")
		easy := challenged(t, err, ErrProofMissing, 4)
		easyProof := Proof{easy.Challenge, solve(t, easy.Challenge, 4)}
		f.apply(t, Levers{PowDifficulty: ptr(6)})
		_, err = rooms.JoinWithProof(ctx, f.id, "u2", easyProof, 6)
		challenged(t, err, ErrProofTooEasy, 6)
		_, err = rooms.JoinWithProof(ctx, f.id, "u2", easyProof, 0)
		hard := challenged(t, err, ErrProofTooEasy, 6)
		st, err = rooms.JoinWithProof(ctx, f.id, "u2", Proof{hard.Challenge, solve(t, hard.Challenge, 6)}, 6)
		if err != nil || st.Status != StatusWaiting || st.Place != 2 {
			t.Fatalf("proof at the raised difficulty: %+v, %v", st, err)
		}

		// Off again: no proof needed, and one presented is not spent.
		f.apply(t, Levers{PowDifficulty: ptr(0)})
		if st, err := rooms.Join(ctx, f.id, "u3"); err != nil || st.Place != 3 {
			t.Fatalf("join with the difficulty 0: %+v, %v", st, err)
		}
		if cn, err := rooms.Counts(ctx, f.id); err != nil || cn.Joined != 3 {
			t.Fatalf("counts %+v, %v; want 3 places", cn, err)
		}
	})
}

// TestUnsolvedJoinsCostRedisNothing: with the room's difficulty known to
// the caller, a join without a valid proof is refused before Redis: even a
// room Redis does not hold answers a challenge.
func TestUnsolvedJoinsCostRedisNothing(t *testing.T) {
	t.Parallel()
	f := setup(t, redistest.Topologies(t)[0], 10) // no room opened
	_, err := f.rooms.JoinWithProof(context.Background(), f.id, "u1", Proof{}, 5)
	challenged(t, err, ErrProofMissing, 5)
}

// BenchmarkSolved measures SHA-256 of a challenge as a join presents it
// (about 150 bytes: three blocks, hashed whole every time, as Web Crypto
// does): the hashes per second a solver like Solve makes on one core.
func BenchmarkSolved(b *testing.B) {
	s, err := NewSigner(testKeys...)
	if err != nil {
		b.Fatal(err)
	}
	tok, _ := s.NewChallenge("spring-drop-2026", "user-0123456789", 20, time.Now())
	b.ReportMetric(float64(len(tok)), "challenge_bytes")
	for i := 0; b.Loop(); i++ {
		Solved(tok, "1234567", 20)
	}
}

// BenchmarkOneBlock measures SHA-256 of one 64-byte block: what a solver
// that keeps the hash state of the challenge's first blocks (native code
// does) pays per try.
func BenchmarkOneBlock(b *testing.B) {
	var buf [55]byte
	for b.Loop() {
		sha256.Sum256(buf[:])
	}
}
