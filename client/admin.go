package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"strings"
	"time"
)

// Event is one entry of the events feed.
type Event struct {
	// ID is the same every time the same change is reported: deduplicate
	// on it.
	ID string `json:"id"`
	// Seq orders the feed.
	Seq         int64     `json:"seq"`
	Type        string    `json:"type"`
	At          time.Time `json:"at"`
	PromotionID string    `json:"promotion_id"`
	// ClaimID is nil for promotion events.
	ClaimID *string `json:"claim_id"`
	// Data holds the event type's fields (docs/contract.md, "Events").
	Data json.RawMessage `json:"data"`
}

// EventPage is one page of the events feed. NextCursor is never empty: with
// no events it is the cursor given, to read from again later.
type EventPage struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"next_cursor"`
}

// EventsOptions pick a page of the events feed.
type EventsOptions struct {
	// Cursor is the previous page's NextCursor; empty reads from the first.
	Cursor string
	// Limit is 1..1,000; 0 leaves the default of 100.
	Limit int
	// Types keeps those event types only; empty keeps all.
	Types []string
}

// Events reads the events after opts.Cursor, in seq order (admin).
func (c *Client) Events(ctx context.Context, opts EventsOptions) (*EventPage, error) {
	q := PageOptions{Limit: opts.Limit, Cursor: opts.Cursor}.query()
	if len(opts.Types) > 0 {
		q.Set("type", strings.Join(opts.Types, ","))
	}
	var out EventPage
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("events"), query: q}, &out)
}

// AuditEntry is one admin request that changed something, or tried to.
type AuditEntry struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	// PromotionID is nil when the route names none.
	PromotionID *string         `json:"promotion_id"`
	Detail      json.RawMessage `json:"detail"`
	Status      int             `json:"status"`
}

// AuditPage is one page of the audit log, newest first.
type AuditPage struct {
	Entries    []AuditEntry `json:"entries"`
	NextCursor *string      `json:"next_cursor"`
}

// ListAudit reads one page of the audit log, newest first (admin).
func (c *Client) ListAudit(ctx context.Context, page PageOptions) (*AuditPage, error) {
	var out AuditPage
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("audit"), query: page.query()}, &out)
}

// Audit iterates over the whole audit log, newest first (admin).
func (c *Client) Audit(ctx context.Context) iter.Seq2[AuditEntry, error] {
	return all[AuditEntry](func(o PageOptions) (*AuditPage, error) { return c.ListAudit(ctx, o) })
}

// AdminToken is an admin token's record. Token is set only in the answer
// of CreateAdminToken.
type AdminToken struct {
	Name string `json:"name"`
	// Source is "config" or "api".
	Source    string     `json:"source"`
	CreatedAt *time.Time `json:"created_at"`
	CreatedBy string     `json:"created_by,omitempty"`
	Token     string     `json:"token,omitempty"`
}

// CreateAdminToken issues a new admin token named name (admin); its value
// is in the answer only.
func (c *Client) CreateAdminToken(ctx context.Context, name string, opts ...RequestOption) (*AdminToken, error) {
	body, err := jsonBody(struct {
		Name string `json:"name"`
	}{name})
	if err != nil {
		return nil, err
	}
	var out AdminToken
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("admin-tokens"), body: body, opts: opts}, &out)
}

// AdminTokens lists the admin tokens, without their values (admin).
func (c *Client) AdminTokens(ctx context.Context) ([]AdminToken, error) {
	var out struct {
		Tokens []AdminToken `json:"admin_tokens"`
	}
	err := c.do(ctx, request{method: http.MethodGet, path: path("admin-tokens")}, &out)
	return out.Tokens, err
}

// DeleteAdminToken revokes a token issued through the API (admin).
func (c *Client) DeleteAdminToken(ctx context.Context, name string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: path("admin-tokens", name)}, nil)
}

// Balance is a user's points over every promotion.
type Balance struct {
	UserID  string `json:"user_id"`
	Balance int64  `json:"balance"`
	Entries int64  `json:"entries"`
}

// Balance reads a user's points.
func (c *Client) Balance(ctx context.Context, userID string) (*Balance, error) {
	var out Balance
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("users", userID, "balance"), auth: authUser}, &out)
}

// EraseUser replaces every stored id of userID with its erased form
// (admin). The server needs an erase secret, else it is a not_found
// *Problem.
func (c *Client) EraseUser(ctx context.Context, userID string, opts ...RequestOption) error {
	return c.do(ctx, request{method: http.MethodDelete, path: path("users", userID), opts: opts}, nil)
}

// Healthz reports whether the server's process runs (nil: it answered 200).
func (c *Client) Healthz(ctx context.Context) error {
	return c.do(ctx, request{method: http.MethodGet, path: "/healthz", auth: authNone}, nil)
}

// Readyz reports whether the server can serve: nil when Redis and the
// database answer it.
func (c *Client) Readyz(ctx context.Context) error {
	return c.do(ctx, request{method: http.MethodGet, path: "/readyz", auth: authNone}, nil)
}
