package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/dibsio/dibs/api"
)

// The shapes of a report, as the server writes them (see package api).
type (
	// TimeBucket is what happened to a promotion's settled claims in one
	// bucket of time.
	TimeBucket = api.TimeBucket
	// Report is the summary of a drop (GET /v1/promotions/{id}/report): its
	// claims from the database, the refusals the answering instance
	// counted, the waiting room while Redis holds it.
	Report = api.Report
)

// Report reads the promotion's report (admin). bucket is the timeline's
// width (1s, 10s, 1m, 10m or 1h); empty lets the server pick.
func (c *Client) Report(ctx context.Context, id, bucket string) (*Report, error) {
	q := url.Values{}
	if bucket != "" {
		q.Set("bucket", bucket)
	}
	var out Report
	return &out, c.do(ctx, request{method: http.MethodGet, path: path("promotions", id, "report"), query: q}, &out)
}
