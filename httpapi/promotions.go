package httpapi

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/promotion"
)

// waitingRoomIn is the waiting_room member of promotionIn: the server's
// decoding of api.WaitingRoomSettings (see promotionIn for why it is its
// own).
type waitingRoomIn struct {
	Enabled             bool `json:"enabled"`
	AdmitPerSecond      *int `json:"admit_per_second"`
	EntryTTLSeconds     *int `json:"entry_ttl_seconds"`
	AbandonAfterSeconds *int `json:"abandon_after_seconds"`
	PrequeueSeconds     *int `json:"prequeue_seconds"`
	// MaxActive, Message and PowDifficulty are the levers a PATCH may
	// change later (see roomPatchIn).
	MaxActive     int    `json:"max_active"`
	Message       string `json:"message"`
	PowDifficulty int    `json:"pow_difficulty"`
	// Page is the queue page's setting (GET /w/{id}).
	Page *promotion.RoomPage `json:"page"`
}

// promotionIn is the body of POST /v1/promotions as the server decodes it:
// the members of api.NewPromotion (TestInputsMatchTheirShapes keeps them
// alike), but a pointer wherever an absent member differs from a zero one
// (stock 0 and per_user_limit 0 are refused, absent they take the
// defaults) and the times as strings, whose errors name their member.
// api.NewPromotion, what a client writes, leaves zero members out instead.
type promotionIn struct {
	ID           *string        `json:"id"`
	Name         string         `json:"name"`
	Mode         string         `json:"mode"`
	Kind         string         `json:"kind"`
	Stock        *int64         `json:"stock"`
	PerUserLimit *int           `json:"per_user_limit"`
	StartsAt     *string        `json:"starts_at"`
	EndsAt       *string        `json:"ends_at"`
	Value        int64          `json:"value"`
	WaitingRoom  *waitingRoomIn `json:"waiting_room"`
	// RevokeReturnsStock: a revoked claim's unit goes back to stock.
	RevokeReturnsStock bool `json:"revoke_returns_stock"`
	// ExpectedClaimsPerSecond sizes the confirmation pools (0: not stated).
	ExpectedClaimsPerSecond int64 `json:"expected_claims_per_second"`
	// Segments splits the stock over that many Redis hash tags (1..64,
	// default 1).
	Segments *int `json:"segments"`
	// AllowPastEndsAt lets a promotion be created whose ends_at has passed
	// already (back-filling); without it that is refused.
	AllowPastEndsAt bool   `json:"allow_past_ends_at"`
	WebhookURL      string `json:"webhook_url"`
}

// formatTime is t as the answers' JSON writes it: RFC 3339 in UTC.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// optTime is t in UTC, or nil (null) for the zero time.
func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// toOut is v as the API shows it.
func toOut(v promotion.View) api.Promotion {
	return api.Promotion{
		ID: v.ID, Name: v.Name, Mode: v.Mode, Kind: v.Kind, Stock: v.Stock,
		PerUserLimit: v.PerUserLimit, Value: v.Value, State: v.State,
		StartsAt: v.StartsAt.UTC(), EndsAt: v.EndsAt.UTC(),
		ClosedAt: optTime(v.ClosedAt), CreatedAt: v.CreatedAt.UTC(), ArchivedAt: optTime(v.ArchivedAt),
		WebhookURL: v.WebhookURL,
		Paused:     v.Paused, RevokeReturnsStock: v.RevokeReturnsStock,
		RetiredAt: optTime(v.RetiredAt), ExpectedClaimsPerSecond: v.ExpectedClaimsPerSecond,
		Segments: max(v.Segments, 1),
		Counts: api.Counts{
			Accepted: v.Counts.Accepted, Pending: v.Counts.Pending, Issued: v.Counts.Issued, Revoked: v.Counts.Revoked,
			Failed: v.Counts.Failed, Remaining: v.Counts.Remaining,
		},
		WaitingRoom: api.RoomView{
			Enabled:             v.WaitingRoom.Enabled,
			AdmitPerSecond:      v.WaitingRoom.AdmitPerSecond,
			EntryTTLSeconds:     v.WaitingRoom.EntryTTLSeconds,
			AbandonAfterSeconds: v.WaitingRoom.AbandonAfterSeconds,
			PrequeueSeconds:     v.WaitingRoom.PrequeueSeconds,
			PrequeueSeedSHA256:  v.WaitingRoom.PrequeueSeedSHA256(),
			PrequeueSeed:        hex.EncodeToString(v.RevealedSeed()),
			MaxActive:           v.WaitingRoom.MaxActive,
			Message:             v.WaitingRoom.Message,
			PowDifficulty:       v.WaitingRoom.PowDifficulty,
			Page:                v.WaitingRoom.Page,
			Waiting:             v.Room.Waiting,
			Admitted:            v.Room.Admitted,
			PassesSpent:         v.Room.PassesSpent,
			Abandoned:           v.Room.Abandoned,
		},
	}
}

func parseTimeField(field string, s *string) (time.Time, *Problem) {
	if s == nil {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return time.Time{}, problem(CodeInvalidRequest, field+" must be an RFC 3339 time such as 2026-11-21T00:00:00Z").withField(field)
	}
	if t.Year() < 2000 || t.Year() > 9999 {
		return time.Time{}, problem(CodeInvalidRequest, field+" is out of range").withField(field)
	}
	return t, nil
}

func (in promotionIn) toPromotion() (promotion.Promotion, *Problem) {
	p := promotion.Promotion{Name: in.Name, Mode: in.Mode, Kind: in.Kind, Value: in.Value, WebhookURL: in.WebhookURL,
		RevokeReturnsStock: in.RevokeReturnsStock}
	if in.ID != nil {
		if !promotion.ValidID(*in.ID) {
			return p, problem(CodeInvalidRequest, "id must be 1-64 characters from A-Z a-z 0-9 _ - . : @, starting with a letter or digit").withField("id")
		}
		p.ID = *in.ID
	}
	if in.Stock != nil {
		if *in.Stock < 1 {
			return p, problem(CodeInvalidRequest, "stock must be between 1 and 1000000000").withField("stock")
		}
		p.Stock = *in.Stock
	}
	if in.PerUserLimit != nil {
		if *in.PerUserLimit < 1 {
			return p, problem(CodeInvalidRequest, "per_user_limit must be between 1 and 1000").withField("per_user_limit")
		}
		p.PerUserLimit = *in.PerUserLimit
	}
	p.ExpectedClaimsPerSecond = in.ExpectedClaimsPerSecond
	if in.Segments != nil {
		if *in.Segments < 1 {
			return p, problem(CodeInvalidRequest, "segments must be between 1 and 64").withField("segments")
		}
		p.Segments = *in.Segments
	}
	var pr *Problem
	if p.StartsAt, pr = parseTimeField("starts_at", in.StartsAt); pr != nil {
		return p, pr
	}
	if p.EndsAt, pr = parseTimeField("ends_at", in.EndsAt); pr != nil {
		return p, pr
	}
	if !in.AllowPastEndsAt {
		// The end as Normalize will fill it in: a past starts_at without
		// ends_at can end in the past too.
		end := p.EndsAt
		if end.IsZero() && !p.StartsAt.IsZero() {
			end = p.StartsAt.Add(promotion.DefaultDuration)
		}
		if !end.IsZero() && !end.After(time.Now()) {
			return p, problem(CodeInvalidRequest, "ends_at has passed: such a promotion would never accept a claim; send \"allow_past_ends_at\": true to create it anyway (back-filling)").withField("ends_at")
		}
	}
	if w := in.WaitingRoom; w != nil {
		p.WaitingRoom.Enabled = w.Enabled
		if w.AdmitPerSecond != nil {
			if *w.AdmitPerSecond < 1 {
				return p, problem(CodeInvalidRequest, "admit_per_second must be between 1 and 1000000").withField("waiting_room.admit_per_second")
			}
			p.WaitingRoom.AdmitPerSecond = *w.AdmitPerSecond
		}
		if w.EntryTTLSeconds != nil {
			if *w.EntryTTLSeconds < 1 {
				return p, problem(CodeInvalidRequest, "entry_ttl_seconds must be between 1 and 86400").withField("waiting_room.entry_ttl_seconds")
			}
			p.WaitingRoom.EntryTTLSeconds = *w.EntryTTLSeconds
		}
		if w.AbandonAfterSeconds != nil {
			// 0 would mean the default: an explicit one is refused.
			if *w.AbandonAfterSeconds < promotion.MinAbandonAfterSeconds {
				return p, problem(CodeInvalidRequest, fmt.Sprintf("abandon_after_seconds must be between %d and %d",
					promotion.MinAbandonAfterSeconds, promotion.MaxAbandonAfterSeconds)).withField("waiting_room.abandon_after_seconds")
			}
			p.WaitingRoom.AbandonAfterSeconds = *w.AbandonAfterSeconds
		}
		if w.PrequeueSeconds != nil {
			p.WaitingRoom.PrequeueSeconds = *w.PrequeueSeconds
		}
		p.WaitingRoom.MaxActive, p.WaitingRoom.Message, p.WaitingRoom.PowDifficulty = w.MaxActive, w.Message, w.PowDifficulty
		p.WaitingRoom.Page = w.Page
	}
	return p, nil
}

func (s *Server) createPromotion(w http.ResponseWriter, r *http.Request) {
	var in promotionIn
	if pr := decodeJSON(w, r, MaxBodyBytes, &in); pr != nil {
		pr.write(w, r)
		return
	}
	p, pr := in.toPromotion()
	if pr != nil {
		pr.write(w, r)
		return
	}
	auditPromotion(r, p.ID) // the id asked for, if any: a refusal names it too
	v, err := s.cfg.Manager.Create(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	auditPromotion(r, v.ID)
	w.Header().Set("Location", "/v1/promotions/"+v.ID)
	writeJSON(w, http.StatusCreated, toOut(v))
}

func (s *Server) getPromotion(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	v, err := s.cfg.Manager.Get(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := toOut(v)
	if !s.callerIsAdmin(r) {
		out.WebhookURL = ""
	}
	writeJSON(w, http.StatusOK, out)
}

// callerIsAdmin reports whether r, a request to a route open to anyone,
// comes from an admin: it carries a known admin bearer token or, without
// an Authorization header, the dashboard's live session (see uiSessionOf:
// from no other origin). Anything else, or an error asking (Redis or the
// database did not answer, too many requests in flight), is not an admin.
// Only admins see a promotion's webhook_url: a partner's endpoint, often
// with a secret in its path.
func (s *Server) callerIsAdmin(r *http.Request) bool {
	if r.Header.Get("Authorization") != "" {
		_, err := s.tokens.adminName(r)
		return err == nil
	}
	_, _, err := s.dash.uiSessionOf(r)
	return err == nil
}

// listStates are the values ?state= takes.
var listStates = []string{promotion.StateOpen, promotion.StateScheduled, promotion.StateSoldOut,
	promotion.StateEnded, promotion.StateClosed, promotion.StateArchived}

// listPromotions lists promotions: ?state= filters (archived ones only
// with state=archived), ?sort=created_at|-created_at orders (default: by
// id), ?cursor= and ?limit= page.
func (s *Server) listPromotions(w http.ResponseWriter, r *http.Request) {
	after, limit, pr := page(r)
	if pr != nil {
		pr.write(w, r)
		return
	}
	q := r.URL.Query()
	lq := promotion.ListQuery{State: q.Get("state"), Sort: q.Get("sort"), Cursor: after, Limit: limit}
	if lq.State != "" && !slices.Contains(listStates, lq.State) {
		problem(CodeInvalidRequest, "state must be one of "+strings.Join(listStates, ", ")).withField("state").write(w, r)
		return
	}
	if lq.Sort == "id" {
		lq.Sort = promotion.SortID
	}
	if lq.Sort != promotion.SortID && lq.Sort != promotion.SortCreatedAt && lq.Sort != promotion.SortCreatedAtDesc {
		problem(CodeInvalidRequest, "sort must be id, created_at or -created_at").withField("sort").write(w, r)
		return
	}
	vs, next, err := s.cfg.Manager.ListBy(r.Context(), lq)
	if errors.Is(err, promotion.ErrBadQuery) {
		problem(CodeInvalidRequest, "cursor is not one this server issued for this sort").withField("cursor").write(w, r)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.PromotionPage{Promotions: make([]api.Promotion, 0, len(vs))}
	admin := s.callerIsAdmin(r)
	for _, v := range vs {
		o := toOut(v)
		if !admin {
			o.WebhookURL = ""
		}
		out.Promotions = append(out.Promotions, o)
	}
	out.NextCursor = nextCursor(next, 1, 1)
	writeJSON(w, http.StatusOK, out)
}

// archivePromotion archives an ended promotion: it leaves the default list
// and stays readable by id. 409 not_ended for one still scheduled or open.
func (s *Server) archivePromotion(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	v, err := s.cfg.Manager.Archive(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toOut(v))
}

// rebuildPromotion marks the promotion rebuilding (its claims wait), merges
// the database's claims into Redis and lets claims go on; it also lifts a
// halt (a database found older than Redis), the operator accepting the
// database as it is.
func (s *Server) rebuildPromotion(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	rep, err := s.cfg.Manager.Rebuild(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Rebuild{
		PromotionID: rep.PromotionID, Claims: rep.Claims, DatabaseMaxRank: rep.Floor, Seq: rep.Seq,
		Requeued: rep.Restored.Requeued, TookMS: rep.Took.Milliseconds(),
	})
}

func (s *Server) closePromotion(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	v, err := s.cfg.Manager.Close(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toOut(v))
}

// getPrequeue publishes a promotion's shuffled prequeue once it started:
// the revealed seed, its hash, and a page of the join list in the order
// the shuffle gave places, so anyone can recompute the order.
func (s *Server) getPrequeue(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	after, limit, pr := page(r)
	if pr != nil {
		pr.write(w, r)
		return
	}
	var offset int64
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 0 {
			problem(CodeInvalidRequest, "cursor is not one this server issued").withField("cursor").write(w, r)
			return
		}
		offset = n
	}
	a, err := s.cfg.Manager.Prequeue(r.Context(), id, offset, int64(limit))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.PrequeuePage{PromotionID: id, Seed: hex.EncodeToString(a.Seed), SeedSHA256: a.SeedSHA256,
		Total: a.Total, Users: a.Users}
	if next := offset + int64(len(a.Users)); next < a.Total {
		out.NextCursor = nextCursor(strconv.FormatInt(next, 10), limit, limit)
	}
	writeJSON(w, http.StatusOK, out)
}
