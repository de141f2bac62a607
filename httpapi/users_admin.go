package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/dibsio/dibs/promotion"
)

// ErasedPrefix starts the one-way token that replaces an erased user's id.
const ErasedPrefix = "erased:"

// ErasedID is the token that replaces userID when it is erased with the
// secret: "erased:" and the hex of HMAC-SHA256(secret, userID). The same
// user and secret always give the same token, so erasing is idempotent and
// the user's rows stay told apart from other users'; without the secret it
// cannot be traced back.
func ErasedID(secret []byte, userID string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(userID))
	return ErasedPrefix + hex.EncodeToString(m.Sum(nil))
}

// userEraser erases a user's ids from the database; promotion.Records is
// one.
type userEraser interface {
	EraseUser(ctx context.Context, userID, erasedID string) (promotion.Erased, error)
}

// eraseUser answers DELETE /v1/users/{user_id}: every id of the user the
// database holds (issued rows, dead letters) is replaced by ErasedID in one
// transaction; counts stay as they were. 204, also when there was nothing
// to erase. Redis keeps the user's per-promotion markers (see
// docs/api.md). The audit entry names the token, never the id.
func (s *Server) eraseUser(w http.ResponseWriter, r *http.Request) {
	annotate(r, "path", nil) // the path holds the id being erased
	if len(s.cfg.EraseSecret) == 0 {
		problem(CodeNotFound, "erasing users is not configured on this server (erase_secret)").write(w, r)
		return
	}
	userID, ok := pathID(w, r, "user_id")
	if !ok {
		return
	}
	token := ErasedID(s.cfg.EraseSecret, userID)
	annotate(r, "user", token)
	n, err := s.rec.eraser.EraseUser(r.Context(), userID, token)
	if err != nil {
		// Not s.fail: its log line would carry the path, the id itself.
		s.log.ErrorContext(r.Context(), "erasing a user failed", "user", token, "err", err)
		problem(CodeUnavailable, "the database did not answer; nothing was erased, retry shortly").retry(1).write(w, r)
		return
	}
	annotate(r, "issued", n.Issued)
	annotate(r, "dead_letters", n.DeadLetters)
	annotate(r, "events", n.Events)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}
