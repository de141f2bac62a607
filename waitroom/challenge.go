package waitroom

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/keyspace"
)

// ChallengeTTL is how long a challenge may be solved and presented.
const ChallengeTTL = 2 * time.Minute

// spentMargin is how much longer than a challenge's own life its spent
// mark is kept: instances judge the expiry by their own clocks, and one a
// little behind must still find the mark.
const spentMargin = time.Minute

// MaxNonceLen is the longest nonce a proof may carry.
const MaxNonceLen = 64

// challengeVersion is the first byte of every challenge's body.
const challengeVersion = 1

// challengeDomain separates challenge signatures from entry tokens'.
const challengeDomain = "dibs-waitroom-challenge-v1\x00"

// challengeIDLen is the length of a challenge's random id, in bytes.
const challengeIDLen = 16

// Challenge is a proof-of-work puzzle handed to a user who joins a room
// that asks for one: find a nonce such that SHA-256(token + ":" + nonce)
// starts with Difficulty zero bits (see Solved). The token is signed with
// the room's entry-token keys and binds the promotion, the user, the
// difficulty and the expiry; its ID makes it single-use.
type Challenge struct {
	// Promotion and User are whom the challenge is for.
	Promotion, User string
	// Difficulty is the leading zero bits a solution's hash must have.
	Difficulty int
	// ExpiresAt is when the challenge stops being accepted (ms precision).
	ExpiresAt time.Time
	// ID is the challenge's random id.
	ID [challengeIDLen]byte
}

// Proof is a solved challenge, as a join presents it.
type Proof struct {
	// Challenge is the challenge token as it was handed out.
	Challenge string
	// Nonce is the solution: 1..MaxNonceLen characters from A-Z a-z 0-9
	// - _ (a decimal counter will do).
	Nonce string
}

// Why a join's proof of work was refused; a *ChallengeError wraps one.
var (
	// ErrProofMissing: the room asks for a proof of work and none came.
	ErrProofMissing = errors.New("waitroom: a proof of work is required")
	// ErrProofForged: the challenge was not made by a key in use.
	ErrProofForged = errors.New("waitroom: forged challenge")
	// ErrProofNotYours: the challenge is another user's or promotion's.
	ErrProofNotYours = errors.New("waitroom: challenge of another user")
	// ErrProofExpired: the challenge expired.
	ErrProofExpired = errors.New("waitroom: challenge expired")
	// ErrProofUnsolved: the nonce is malformed or does not solve the
	// challenge.
	ErrProofUnsolved = errors.New("waitroom: challenge not solved")
	// ErrProofTooEasy: the challenge's difficulty is below the room's
	// (raised since it was handed out).
	ErrProofTooEasy = errors.New("waitroom: challenge easier than the room asks")
	// ErrProofSpent: the challenge was presented before.
	ErrProofSpent = errors.New("waitroom: challenge already used")
	// ErrChallengeRequired matches every *ChallengeError with errors.Is.
	ErrChallengeRequired = errors.New("waitroom: challenge required")
)

// ChallengeError refuses a join for want of a valid proof of work. It
// carries a fresh challenge for the user at the room's difficulty.
type ChallengeError struct {
	// Reason is one of the ErrProof errors.
	Reason error
	// Difficulty is the room's difficulty, the fresh challenge's.
	Difficulty int
	// Challenge is the fresh challenge's token.
	Challenge string
	// ExpiresAt is when the fresh challenge expires.
	ExpiresAt time.Time
}

func (e *ChallengeError) Error() string {
	return "waitroom: challenge required (difficulty " + strconv.Itoa(e.Difficulty) + "): " + e.Reason.Error()
}

// Unwrap returns the reason.
func (e *ChallengeError) Unwrap() error { return e.Reason }

// Is matches ErrChallengeRequired.
func (e *ChallengeError) Is(target error) bool { return target == ErrChallengeRequired }

// NewChallenge makes and signs a challenge for user in promotion at
// difficulty, expiring ChallengeTTL after now, and returns its token:
// URL-safe base64 (no padding) of its fields and an HMAC-SHA256 of them.
func (s *Signer) NewChallenge(promotion, user string, difficulty int, now time.Time) (string, Challenge) {
	c := Challenge{Promotion: promotion, User: user, Difficulty: difficulty,
		ExpiresAt: now.Add(ChallengeTTL).Truncate(time.Millisecond)}
	_, _ = rand.Read(c.ID[:]) // never fails (crypto/rand)
	k := s.keys[0]
	body := make([]byte, 0, 8+len(k.ID)+len(promotion)+len(user)+binary.MaxVarintLen64+challengeIDLen+sha256.Size)
	body = append(body, challengeVersion)
	body = appendString(body, k.ID)
	body = appendString(body, promotion)
	body = appendString(body, user)
	body = append(body, byte(difficulty))
	body = binary.AppendUvarint(body, uint64(c.ExpiresAt.UnixMilli()))
	body = append(body, c.ID[:]...)
	return base64.RawURLEncoding.EncodeToString(append(body, challengeMAC(k.Secret, body)...)), c
}

// CheckProof checks p for user in promotion at now, in O(1): the
// challenge's signature, whom it is for, its expiry, and that the nonce
// solves it. It returns the challenge, or ErrProofForged, ErrProofNotYours,
// ErrProofExpired or ErrProofUnsolved. Whether it was presented before only
// Redis knows (the join spends it).
func (s *Signer) CheckProof(promotion, user string, p Proof, now time.Time) (Challenge, error) {
	raw, err := base64.RawURLEncoding.DecodeString(p.Challenge)
	if err != nil || len(raw) < 1+sha256.Size {
		return Challenge{}, ErrProofForged
	}
	body, sum := raw[:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
	c, kid, err := parseChallenge(body)
	if err != nil {
		return Challenge{}, ErrProofForged
	}
	var key *Key
	for i := range s.keys {
		if s.keys[i].ID == kid {
			key = &s.keys[i]
		}
	}
	if key == nil || !hmac.Equal(sum, challengeMAC(key.Secret, body)) {
		return Challenge{}, ErrProofForged
	}
	switch {
	case c.Promotion != promotion || c.User != user:
		return Challenge{}, ErrProofNotYours
	case !now.Before(c.ExpiresAt):
		return Challenge{}, ErrProofExpired
	case !validNonce(p.Nonce) || !Solved(p.Challenge, p.Nonce, c.Difficulty):
		return Challenge{}, ErrProofUnsolved
	}
	return c, nil
}

// Solved reports whether SHA-256(challenge + ":" + nonce) starts with at
// least difficulty zero bits (the first byte's most significant bit
// first): the API's rule, api.Solved.
func Solved(challenge, nonce string, difficulty int) bool {
	return api.Solved(challenge, nonce, difficulty)
}

// Solve finds a nonce that solves challenge at difficulty (decimal
// counters from 0), about 2^difficulty hashes; it gives up with ctx's
// error. It is the reference solver (tests, load generators):
// api.SolveChallenge, as clients run it.
func Solve(ctx context.Context, challenge string, difficulty int) (string, error) {
	return api.SolveChallenge(ctx, challenge, difficulty)
}

func validNonce(s string) bool {
	if len(s) < 1 || len(s) > MaxNonceLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func challengeMAC(secret, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(challengeDomain))
	h.Write(body)
	return h.Sum(nil)
}

// parseChallenge reads a challenge body: version, key id, promotion, user,
// difficulty, expiry (ms), id.
func parseChallenge(b []byte) (Challenge, string, error) {
	if len(b) == 0 || b[0] != challengeVersion {
		return Challenge{}, "", errBody
	}
	b = b[1:]
	var strs [3]string
	for i := range strs {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return Challenge{}, "", errBody
		}
		strs[i] = string(b[w : w+int(n)])
		b = b[w+int(n):]
	}
	if len(b) < 1 {
		return Challenge{}, "", errBody
	}
	d := int(b[0])
	b = b[1:]
	exp, w := binary.Uvarint(b)
	if w <= 0 || exp > 1<<62 || len(b)-w != challengeIDLen {
		return Challenge{}, "", errBody
	}
	c := Challenge{Promotion: strs[1], User: strs[2], Difficulty: d, ExpiresAt: time.UnixMilli(int64(exp)).UTC()}
	copy(c.ID[:], b[w:])
	return c, strs[0], nil
}

// spentChallenge is the key that marks challenge id of promotion's room
// spent, under the room's hash tag.
func (k Keys) spentChallenge(id [challengeIDLen]byte) string {
	return k.space.Key(keyspace.RoomSpentChallenge + hex.EncodeToString(id[:]))
}

// JoinWithProof is Join for a room that may ask for a proof of work (its
// PowDifficulty above 0): proof is the user's solved challenge (the zero
// Proof for none). atLeast is the difficulty the caller knows the room asks
// for, 0 if unknown: a join without a valid proof of at least that
// difficulty is refused without asking Redis, so unsolved joins cost Redis
// nothing. Redis has the last word: the room's current difficulty, and
// whether the challenge was presented before (a valid proof is spent by the
// join, even one the room no longer needs while its difficulty is 0 is
// not). A refusal is a *ChallengeError with a fresh challenge.
func (r *Rooms) JoinWithProof(ctx context.Context, id, userID string, proof Proof, atLeast int) (Standing, error) {
	now := r.cfg.Now()
	var (
		c      Challenge
		reason = ErrProofMissing
	)
	if proof != (Proof{}) {
		var err error
		if c, err = r.signer.CheckProof(id, userID, proof, now); err != nil {
			reason, c = err, Challenge{}
		} else if c.Difficulty < atLeast {
			reason, c = ErrProofTooEasy, Challenge{}
		} else {
			reason = nil
		}
	}
	if reason != nil && atLeast > 0 {
		return Standing{}, r.challenge(id, userID, atLeast, reason, now)
	}
	k := r.Keys(id)
	spent, keep := k.space.Key(keyspace.RoomSpentChallenge), int64(1)
	if reason == nil {
		spent = k.spentChallenge(c.ID)
		keep = max(c.ExpiresAt.Sub(now)+spentMargin, time.Millisecond).Milliseconds()
	}
	vals, err := joinScript.Exec(ctx, r.client, append(k.join(), spent),
		[]string{userID, strconv.Itoa(c.Difficulty), strconv.FormatInt(keep, 10)}).ToArray()
	if err != nil {
		return Standing{}, fmt.Errorf("join %s for %s: %w", id, userID, err)
	}
	if len(vals) >= 2 {
		if s, _ := vals[0].ToString(); s == "challenge" {
			d, err := vals[1].AsInt64()
			if err != nil {
				return Standing{}, fmt.Errorf("join %s for %s: %w", id, userID, err)
			}
			switch {
			case len(vals) > 2:
				reason = ErrProofSpent
			case reason == nil:
				reason = ErrProofTooEasy
			}
			return Standing{}, r.challenge(id, userID, int(d), reason, now)
		}
	}
	st, err := r.standing(id, userID, vals)
	if err != nil {
		return Standing{}, fmt.Errorf("join %s for %s: %w", id, userID, err)
	}
	if reason == nil {
		r.pow.add(id, outcomeSolved)
	}
	return st, nil
}

// challenge refuses a join with a fresh challenge at difficulty, and
// counts the refusal and the challenge handed out.
func (r *Rooms) challenge(id, userID string, difficulty int, reason error, now time.Time) *ChallengeError {
	r.pow.add(id, outcomeOf(reason), outcomeIssued)
	tok, c := r.signer.NewChallenge(id, userID, difficulty, now)
	return &ChallengeError{Reason: reason, Difficulty: difficulty, Challenge: tok, ExpiresAt: c.ExpiresAt}
}
