package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/promotion"
)

// PausedRetryAfter is the Retry-After, in seconds, of a claim on a
// promotion an admin paused: a pause has no known end, so clients are told
// to come back after a while rather than at once.
const PausedRetryAfter = 5

// patchIn is the body of PATCH /v1/promotions/{id}: every field optional,
// merge semantics (a field left out is kept). Unknown fields get 400. It is
// the server's decoding of api.PromotionPatch, with the same members
// (TestInputsMatchTheirShapes): ends_at as a string, whose error names its
// member, and waiting_room.page told apart as left out, null or an object
// (pagePatchIn), decoded strictly.
type patchIn struct {
	Name               *string `json:"name"`
	Stock              *int64  `json:"stock"`
	EndsAt             *string `json:"ends_at"`
	Paused             *bool   `json:"paused"`
	RevokeReturnsStock *bool   `json:"revoke_returns_stock"`
	// WaitingRoom changes the waiting room's levers while its line runs.
	WaitingRoom *roomPatchIn `json:"waiting_room"`
}

// roomPatchIn is the waiting_room member of a PATCH: the levers of a
// running waiting room, each optional (see promotion.RoomChange).
type roomPatchIn struct {
	AdmitPerSecond *int    `json:"admit_per_second"`
	MaxActive      *int    `json:"max_active"`
	Message        *string `json:"message"`
	PowDifficulty  *int    `json:"pow_difficulty"`
	// Page replaces the queue page's setting; null resets it.
	Page pagePatchIn `json:"page"`
}

// pagePatchIn is the page member of a PATCH's waiting_room: left out, it
// keeps the setting; an object replaces it as a whole; null resets it to
// the page's defaults.
type pagePatchIn struct {
	set  bool
	page *promotion.RoomPage
}

// UnmarshalJSON reads the member strictly, as decodeJSON reads a body: an
// unknown field is named by its whole path.
func (p *pagePatchIn) UnmarshalJSON(b []byte) error {
	p.set, p.page = true, nil
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var pg promotion.RoomPage
	if err := dec.Decode(&pg); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			f = "waiting_room.page." + strings.Trim(f, `"`)
			return &fieldError{field: f, msg: "unknown field " + strconv.Quote(f)}
		}
		return err
	}
	p.page = &pg
	return nil
}

// change is the member as a promotion.RoomChange takes it.
func (p pagePatchIn) change() *promotion.RoomPageChange {
	if !p.set {
		return nil
	}
	return &promotion.RoomPageChange{To: p.page}
}

// patchPromotion changes a running promotion: name, stock, ends_at,
// paused, revoke_returns_stock, the waiting room's levers and its queue
// page's setting (see
// promotion.Manager.Patch).
func (s *Server) patchPromotion(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	var in patchIn
	if pr := decodeJSON(w, r, MaxBodyBytes, &in); pr != nil {
		pr.write(w, r)
		return
	}
	c := promotion.Change{Name: in.Name, Stock: in.Stock, Paused: in.Paused, RevokeReturnsStock: in.RevokeReturnsStock}
	if w := in.WaitingRoom; w != nil {
		c.WaitingRoom = &promotion.RoomChange{AdmitPerSecond: w.AdmitPerSecond, MaxActive: w.MaxActive,
			Message: w.Message, PowDifficulty: w.PowDifficulty, Page: w.Page.change()}
	}
	if in.EndsAt != nil {
		t, pr := parseTimeField("ends_at", in.EndsAt)
		if pr != nil {
			pr.write(w, r)
			return
		}
		c.EndsAt = &t
	}
	v, changed, err := s.cfg.Manager.PatchChanged(r.Context(), id, c)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	annotate(r, "fields", changed)
	writeJSON(w, http.StatusOK, toOut(v))
}

// revokeClaims revokes issued claims (see promotion.Manager.Revoke): all
// or nothing on validation, then each claim revoked or reported skipped.
func (s *Server) revokeClaims(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	ids, ok := claimIDsIn(w, r)
	if !ok {
		return
	}
	res, err := s.cfg.Manager.Revoke(r.Context(), id, ids)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if res.Skipped == nil {
		res.Skipped = []string{}
	}
	if res.Pending == nil {
		res.Pending = []string{}
	}
	refused := make([]api.RefusedUndo, 0, len(res.Refused))
	for _, f := range res.Refused {
		refused = append(refused, api.RefusedUndo{ClaimID: f.ClaimID, Reason: f.Reason})
	}
	if len(refused) > 0 {
		annotate(r, "refused", refused)
	}
	writeJSON(w, http.StatusOK, api.Revoked{Revoked: res.Revoked, Skipped: res.Skipped, Pending: res.Pending, Refused: refused})
}
