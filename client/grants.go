package client

import (
	"context"
	"io"
	"net/http"

	"github.com/dibsio/dibs/api"
)

// ndjson is the media type of streamed uploads.
const ndjson = "application/x-ndjson"

// The shapes of upload answers, as the server writes them (see package
// api).
type (
	// LineError is a rejected line of an upload (1-based).
	LineError = api.LineError
	// GrantResult is the answer of a grant upload. Errors holds at most
	// the first 100 rejected lines.
	GrantResult = api.GrantResult
	// CodesResult is the answer of a code upload: Total is the pool's
	// size, Free the codes no claim took.
	CodesResult = api.CodesResult
)

// Grant enqueues userIDs (up to 10,000) as targets of a grant promotion
// (admin), all or nothing: one bad id is a *Problem and nothing is
// enqueued.
func (c *Client) Grant(ctx context.Context, promotion string, userIDs []string, opts ...RequestOption) (*GrantResult, error) {
	body, err := jsonBody(api.GrantsUpload{UserIDs: userIDs})
	if err != nil {
		return nil, err
	}
	var out GrantResult
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("promotions", promotion, "grants"), body: body, opts: opts}, &out)
}

// GrantNDJSON streams r, lines of {"user_id": "..."}, as the targets of a
// grant promotion (admin). The server applies it line by line, of any
// size, and reports each rejected line in the result.
func (c *Client) GrantNDJSON(ctx context.Context, promotion string, r io.Reader, opts ...RequestOption) (*GrantResult, error) {
	var out GrantResult
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("promotions", promotion, "grants"), body: r, ctype: ndjson, opts: opts}, &out)
}

// UploadCodes adds codes (1 to 10,000) to a coupon promotion's code pool
// (admin), all or nothing.
func (c *Client) UploadCodes(ctx context.Context, promotion string, codes []string, opts ...RequestOption) (*CodesResult, error) {
	body, err := jsonBody(api.CodesUpload{Codes: codes})
	if err != nil {
		return nil, err
	}
	var out CodesResult
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("promotions", promotion, "codes"), body: body, opts: opts}, &out)
}

// UploadCodesNDJSON streams r, lines of {"code": "..."}, into a coupon
// promotion's code pool (admin); bad lines are reported in the result.
func (c *Client) UploadCodesNDJSON(ctx context.Context, promotion string, r io.Reader, opts ...RequestOption) (*CodesResult, error) {
	var out CodesResult
	return &out, c.do(ctx, request{method: http.MethodPost, path: path("promotions", promotion, "codes"), body: r, ctype: ndjson, opts: opts}, &out)
}
