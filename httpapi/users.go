package httpapi

import (
	"net/http"

	"github.com/dibsio/dibs/api"
)

// getBalance answers a user's points: the sum of the ledger entries point
// promotions credited, and how many there are.
func (s *Server) getBalance(w http.ResponseWriter, r *http.Request) {
	user, ok := pathID(w, r, "user_id")
	if !ok {
		return
	}
	b, err := s.cfg.Manager.Balance(r.Context(), user)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Balance{UserID: b.UserID, Balance: b.Points, Entries: b.Entries})
}
