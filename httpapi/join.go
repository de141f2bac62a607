package httpapi

import (
	"errors"
	"net/http"

	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/waitroom"
)

// joinRoom joins user to promotion id's room with proof, the user's solved
// proof-of-work challenge (the zero Proof for none). A room that asks for a
// proof refuses a join without a valid one with challenge_required and a
// fresh challenge; the difficulty this instance knows is checked before
// Redis is asked, so unsolved joins cost Redis nothing. ok false means the
// request was answered with a problem.
func (s *waitingRooms) joinRoom(w http.ResponseWriter, r *http.Request, id, user string, proof waitroom.Proof) (st waitroom.Standing, ok bool) {
	rooms := s.manager.Rooms()
	if rooms == nil {
		s.noRoom(w, r, id)
		return st, false
	}
	call := func() (waitroom.Standing, error) {
		return rooms.JoinWithProof(r.Context(), id, user, proof, s.manager.RoomPowDifficulty(id))
	}
	return s.inRoom(w, r, id, call)
}

// challengeProblem is the problem of a join refused for its proof of work:
// challenge_required with a fresh challenge.
func challengeProblem(ce *promotion.ChallengeError) *Problem {
	pr := problem(CodeChallengeRequired, challengeDetail(ce.Reason))
	pr.Challenge, pr.Difficulty = ce.Challenge, ce.Difficulty
	if !ce.ExpiresAt.IsZero() {
		at := formatTime(ce.ExpiresAt)
		pr.ChallengeExpiresAt = &at
	}
	return pr
}

// challengeDetail says why a join's proof of work was refused.
func challengeDetail(reason error) string {
	const solve = `: find a nonce such that SHA-256(challenge + ":" + nonce) starts with difficulty zero bits, and join again with "challenge" and "nonce"`
	switch {
	case errors.Is(reason, waitroom.ErrProofSpent):
		return "this challenge was used already; solve the new one" + solve
	case errors.Is(reason, waitroom.ErrProofExpired):
		return "the challenge expired; solve the new one" + solve
	case errors.Is(reason, waitroom.ErrProofTooEasy):
		return "the waiting room asks for more work now; solve the new one" + solve
	case errors.Is(reason, waitroom.ErrProofMissing):
		return "the waiting room asks for a proof of work" + solve
	default:
		return "the proof of work is not valid (a forged or another user's challenge, or a wrong nonce)" + solve
	}
}
