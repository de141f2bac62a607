package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/dibsio/dibs/api"
	"github.com/dibsio/dibs/promotion"
)

// auditTimeout bounds writing one audit row.
const auditTimeout = 2 * time.Second

// actions names the admin routes in the audit log; a route missing here is
// logged under its pattern.
var actions = map[string]string{
	"POST /v1/promotions":                          "promotion.create",
	"PATCH /v1/promotions/{id}":                    "promotion.change",
	"POST /v1/promotions/{id}/close":               "promotion.close",
	"POST /v1/promotions/{id}/codes":               "promotion.codes",
	"POST /v1/promotions/{id}/claims/revoke":       "claims.revoke",
	"POST /v1/promotions/{id}/archive":             "promotion.archive",
	"POST /v1/promotions/{id}/rebuild":             "promotion.rebuild",
	"POST /v1/promotions/{id}/grants":              "promotion.grants",
	"POST /v1/promotions/{id}/dead-letters/replay": "dead_letters.replay",
	"POST /v1/promotions/{id}/dead-letters/void":   "dead_letters.void",
	"POST /v1/admin-tokens":                        "admin_token.create",
	"DELETE /v1/admin-tokens/{name}":               "admin_token.delete",
	"DELETE /v1/users/{user_id}":                   "user.erase",
}

// auditNote is what an admin request's handler adds to its audit entry; the
// admin middleware puts one in the request's context and reads it after
// the handler. It belongs to the request's goroutine.
type auditNote struct {
	actor  string
	detail map[string]any
	// promotion is the promotion acted on when the route's path names
	// none (a creation): see auditPromotion.
	promotion string
}

type auditKey struct{}

// annotate adds key: value to the audit entry of the admin request r, if
// it is one; value must not be a secret. A nil value removes the key.
func annotate(r *http.Request, key string, value any) {
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok {
		if value == nil {
			delete(n.detail, key)
			return
		}
		n.detail[key] = value
	}
}

// auditPromotion records id as the promotion the admin request r acts on,
// for a route whose path names none (POST /v1/promotions).
func auditPromotion(r *http.Request, id string) {
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok {
		n.promotion = id
	}
}

// actorOf is the name of the admin token r was authenticated with, "" if
// none.
func actorOf(r *http.Request) string {
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok {
		return n.actor
	}
	return ""
}

// statusWriter notes the status a handler answers.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// auditTrail records the admin actions, in the log and in the audit log
// of the database, and lists them.
type auditTrail struct {
	*failureLogs
	store auditLog
}

// audited runs h for the admin actor and, for a request that changes
// something (any method but GET and HEAD), records who did what, on which
// promotion, with which outcome: one row in the audit log and one log
// line. The detail holds the path and what the handler annotated, never
// the token or the body.
func (s *auditTrail) audited(actor string, w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	note := &auditNote{actor: actor, detail: map[string]any{"path": r.URL.Path}}
	r = r.WithContext(context.WithValue(r.Context(), auditKey{}, note))
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		h(w, r)
		return
	}
	if r.Header.Get("Idempotency-Key") != "" {
		note.detail["idempotency_key"] = true
	}
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		// Also when h panicked: the action may have happened.
		status := sw.status
		if status == 0 {
			status = http.StatusInternalServerError
		}
		if w.Header().Get("Idempotent-Replayed") == "true" {
			note.detail["replayed"] = true
		}
		s.recordAudit(r, note, status, start)
	}()
	h(sw, r)
}

func (s *auditTrail) recordAudit(r *http.Request, note *auditNote, status int, start time.Time) {
	action, ok := actions[r.Pattern]
	if !ok {
		action = r.Pattern
	}
	promo := note.promotion
	if promo == "" {
		promo = r.PathValue("id")
	}
	detail, _ := json.Marshal(note.detail)
	s.log.InfoContext(r.Context(), "admin action", "actor", note.actor, "action", action, "promotion", promo,
		"status", status, "detail", string(detail), "took_ms", time.Since(start).Milliseconds())
	ctx, cancel := withTimeout(r, auditTimeout)
	defer cancel()
	err := s.store.AppendAudit(ctx, promotion.AuditEntry{
		At: start.UTC(), Actor: note.actor, Action: action, PromotionID: promo, Detail: string(detail), Status: status,
	})
	if err != nil {
		s.log.WarnContext(r.Context(), "audit log row not written; the log line above stands for it", "action", action, "actor", note.actor, "err", err)
	}
}

// auditLog keeps the audit log; promotion.Records is one.
type auditLog interface {
	AppendAudit(ctx context.Context, e promotion.AuditEntry) error
	ListAudit(ctx context.Context, beforeID int64, limit int) ([]promotion.AuditEntry, error)
}

// listAudit pages through the audit log, newest first.
func (s *auditTrail) listAudit(w http.ResponseWriter, r *http.Request) {
	after, limit, pr := page(r)
	if pr != nil {
		pr.write(w, r)
		return
	}
	var before int64
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 1 {
			problem(CodeInvalidRequest, "cursor is not one this server issued").withField("cursor").write(w, r)
			return
		}
		before = n
	}
	es, err := s.store.ListAudit(r.Context(), before, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.AuditPage{Entries: make([]api.AuditEntry, 0, len(es))}
	for _, e := range es {
		a := api.AuditEntry{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, Detail: json.RawMessage(e.Detail), Status: e.Status}
		if e.PromotionID != "" {
			a.PromotionID = &e.PromotionID
		}
		if !json.Valid(a.Detail) {
			a.Detail = json.RawMessage("{}")
		}
		out.Entries = append(out.Entries, a)
	}
	if len(es) > 0 && es[len(es)-1].ID > 1 {
		out.NextCursor = nextCursor(strconv.FormatInt(es[len(es)-1].ID, 10), len(es), limit)
	}
	writeJSON(w, http.StatusOK, out)
}
