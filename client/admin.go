package client

import (
	"context"
	"iter"
	"net/http"
	"strings"

	"github.com/dibsio/dibs/api"
)

// The shapes of the admin resources, as the server writes them (see
// package api).
type (
	// Event is one entry of the events feed.
	Event = api.Event
	// EventPage is one page of the events feed. NextCursor is never empty:
	// with no events it is the cursor given, to read from again later.
	EventPage = api.EventPage
	// AuditEntry is one admin request that changed something, or tried to.
	AuditEntry = api.AuditEntry
	// AuditPage is one page of the audit log, newest first.
	AuditPage = api.AuditPage
	// AdminToken is an admin token's record. Token is set only in the
	// answer of CreateAdminToken.
	AdminToken = api.AdminToken
	// Balance is a user's points over every promotion.
	Balance = api.Balance
)

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

// ListAudit reads one page of the audit log, newest first (admin).
func (c *Client) ListAudit(ctx context.Context, page PageOptions) (*AuditPage, error) {
	var out AuditPage
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("audit"), query: page.query()}, &out)
}

// Audit iterates over the whole audit log, newest first (admin).
func (c *Client) Audit(ctx context.Context) iter.Seq2[AuditEntry, error] {
	return all(func(o PageOptions) (*AuditPage, error) { return c.ListAudit(ctx, o) }, auditItems)
}

// CreateAdminToken issues a new admin token named name (admin); its value
// is in the answer only.
func (c *Client) CreateAdminToken(ctx context.Context, name string, opts ...RequestOption) (*AdminToken, error) {
	body, err := jsonBody(api.AdminTokenCreate{Name: name})
	if err != nil {
		return nil, err
	}
	var out AdminToken
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("admin-tokens"), body: body, opts: opts}, &out)
}

// AdminTokens lists the admin tokens, without their values (admin).
func (c *Client) AdminTokens(ctx context.Context) ([]AdminToken, error) {
	var out api.AdminTokenList
	err := c.do(ctx, request{method: http.MethodGet, path: path("admin-tokens")}, &out)
	return out.AdminTokens, err
}

// DeleteAdminToken revokes a token issued through the API (admin).
func (c *Client) DeleteAdminToken(ctx context.Context, name string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: path("admin-tokens", name)}, nil)
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
