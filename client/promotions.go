package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/dibsio/dibs/api"
)

// Promotion modes and kinds.
const (
	ModeFirstCome = "first_come" // users race for the stock
	ModeGrant     = "grant"      // an admin uploads the targets; each gets one

	KindCoupon  = "coupon"
	KindVoucher = "voucher"
	KindPoint   = "point"
	KindWebhook = "webhook"
)

// Promotion states, as the server shows them and as list filters.
const (
	StateScheduled = "scheduled"
	StateOpen      = "open"
	StateSoldOut   = "sold_out"
	StateEnded     = "ended"
	StateClosed    = "closed"   // a list filter only: closed by an admin, shown as ended
	StateArchived  = "archived" // a list filter only
)

// The shapes of a promotion, as the server writes and reads them (see
// package api).
type (
	// NewPromotion is the body of CreatePromotion. Zero fields are left out
	// and take the server's defaults.
	NewPromotion = api.NewPromotion
	// WaitingRoomSettings configure a promotion's waiting room at creation;
	// zero fields take the server's defaults.
	WaitingRoomSettings = api.WaitingRoomSettings
	// QueuePage is the setting of a waiting room's queue page (GET
	// /w/{id}): every member is optional, the page has a default for each.
	QueuePage = api.QueuePage
	// QueuePageColors are a queue page's colours.
	QueuePageColors = api.QueuePageColors
	// PageChange replaces the setting of a waiting room's queue page (see
	// WaitingRoomPatch.Page): To is the new setting, nil to go back to the
	// page's defaults (sent as null).
	PageChange = api.PageChange
	// Promotion is a promotion as the server shows it.
	Promotion = api.Promotion
	// Counts are a promotion's claim counts. Remaining is nil for grant
	// promotions.
	Counts = api.Counts
	// RoomView is a promotion's waiting room: its settings (when enabled)
	// and counts.
	RoomView = api.RoomView
	// PromotionPatch is the body of PatchPromotion: nil fields are kept.
	PromotionPatch = api.PromotionPatch
	// WaitingRoomPatch changes the levers of a running waiting room and
	// its queue page's setting: nil fields are kept.
	WaitingRoomPatch = api.WaitingRoomPatch
	// PromotionPage is one page of ListPromotions.
	PromotionPage = api.PromotionPage
	// Rebuild is the answer of RebuildPromotion.
	Rebuild = api.Rebuild
	// PrequeuePage is one page of the opening moment's audit record.
	PrequeuePage = api.PrequeuePage
)

// PromotionFilter selects the promotions ListPromotions and Promotions
// return.
type PromotionFilter struct {
	// State is one of the State constants; empty lists every promotion not
	// archived.
	State string
	// Sort is "created_at", "-created_at", or empty (by id).
	Sort string
}

// PageOptions pick one page of a list.
type PageOptions struct {
	// Limit is 1..1,000; 0 leaves the server's default of 100.
	Limit int
	// Cursor is the NextCursor of the previous page; empty for the first.
	Cursor string
}

func (o PageOptions) query() url.Values {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return q
}

// CreatePromotion creates a promotion (admin).
func (c *Client) CreatePromotion(ctx context.Context, p NewPromotion, opts ...RequestOption) (*Promotion, error) {
	body, err := jsonBody(p)
	if err != nil {
		return nil, err
	}
	var out Promotion
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("promotions"), body: body, opts: opts}, &out)
}

// GetPromotion reads a promotion, archived ones too.
func (c *Client) GetPromotion(ctx context.Context, id string) (*Promotion, error) {
	var out Promotion
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("promotions", id)}, &out)
}

// ListPromotions reads one page of promotions.
func (c *Client) ListPromotions(ctx context.Context, f PromotionFilter, page PageOptions) (*PromotionPage, error) {
	q := page.query()
	if f.State != "" {
		q.Set("state", f.State)
	}
	if f.Sort != "" {
		q.Set("sort", f.Sort)
	}
	var out PromotionPage
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("promotions"), query: q}, &out)
}

// Promotions iterates over every promotion f selects, reading pages as
// needed. The iteration stops at the first error, which it yields.
func (c *Client) Promotions(ctx context.Context, f PromotionFilter) iter.Seq2[Promotion, error] {
	return all(func(o PageOptions) (*PromotionPage, error) { return c.ListPromotions(ctx, f, o) }, promotionItems)
}

// ClosePromotion ends a promotion now (admin).
func (c *Client) ClosePromotion(ctx context.Context, id string, opts ...RequestOption) (*Promotion, error) {
	var out Promotion
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("promotions", id, "close"), opts: opts}, &out)
}

// ArchivePromotion archives an ended promotion (admin).
func (c *Client) ArchivePromotion(ctx context.Context, id string, opts ...RequestOption) (*Promotion, error) {
	var out Promotion
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("promotions", id, "archive"), opts: opts}, &out)
}

// PatchPromotion changes a running promotion (admin).
func (c *Client) PatchPromotion(ctx context.Context, id string, p PromotionPatch, opts ...RequestOption) (*Promotion, error) {
	body, err := jsonBody(p)
	if err != nil {
		return nil, err
	}
	var out Promotion
	return &out, c.do(ctx, request{method: http.MethodPatch, path: path("promotions", id), body: body, opts: opts}, &out)
}

// RebuildPromotion merges the database's claims of a promotion into Redis
// (admin).
func (c *Client) RebuildPromotion(ctx context.Context, id string, opts ...RequestOption) (*Rebuild, error) {
	var out Rebuild
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("promotions", id, "rebuild"), opts: opts}, &out)
}

// Prequeue reads one page of the opening moment's shuffle record (admin).
func (c *Client) Prequeue(ctx context.Context, id string, page PageOptions) (*PrequeuePage, error) {
	var out PrequeuePage
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("promotions", id, "prequeue"), query: page.query()}, &out)
}

// The items of a page of each list, and the next page's cursor (nil on
// the last page).
func promotionItems(p *PromotionPage) ([]Promotion, *string)    { return p.Promotions, p.NextCursor }
func winnerItems(p *WinnerPage) ([]Winner, *string)             { return p.Claims, p.NextCursor }
func deadLetterItems(p *DeadLetterPage) ([]DeadLetter, *string) { return p.DeadLetters, p.NextCursor }
func auditItems(p *AuditPage) ([]AuditEntry, *string)           { return p.Entries, p.NextCursor }

// all iterates over the items of the pages list returns, pages of 1,000
// from the first until the last; items takes a page's items and the next
// page's cursor. An error is yielded once, with the zero item, and ends the
// iteration.
func all[T, P any](list func(PageOptions) (*P, error), items func(*P) ([]T, *string)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := ""
		for {
			p, err := list(PageOptions{Limit: 1000, Cursor: cursor})
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			page, next := items(p)
			for _, it := range page {
				if !yield(it, nil) {
					return
				}
			}
			if next == nil || *next == "" || *next == cursor {
				return
			}
			cursor = *next
		}
	}
}
