package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// TimeBucket is what happened to a promotion's settled claims in one
// bucket of time.
type TimeBucket struct {
	At           time.Time `json:"at"`
	Accepted     int64     `json:"accepted"`
	Issued       int64     `json:"issued"`
	MaxLagMS     int64     `json:"max_lag_ms"`
	DeadLettered int64     `json:"dead_lettered"`
}

// Report is the summary of a drop (GET /v1/promotions/{id}/report): its
// claims from the database, the refusals the answering instance counted,
// the waiting room while Redis holds it.
type Report struct {
	PromotionID     string           `json:"promotion_id"`
	Name            string           `json:"name"`
	Mode            string           `json:"mode"`
	Kind            string           `json:"kind"`
	State           string           `json:"state"`
	Stock           int64            `json:"stock"`
	StartsAt        time.Time        `json:"starts_at"`
	EndsAt          time.Time        `json:"ends_at"`
	ClosedAt        *time.Time       `json:"closed_at"`
	GeneratedAt     time.Time        `json:"generated_at"`
	Accepted        int64            `json:"accepted"`
	Issued          int64            `json:"issued"`
	Revoked         int64            `json:"revoked"`
	Pending         int64            `json:"pending"`
	DeadLetters     map[string]int64 `json:"dead_letters"`
	SoldOutAt       *time.Time       `json:"sold_out_at"`
	FirstAcceptedAt *time.Time       `json:"first_accepted_at"`
	LastAcceptedAt  *time.Time       `json:"last_accepted_at"`
	LastIssuedAt    *time.Time       `json:"last_issued_at"`
	IssueLag        struct {
		P50MS int64 `json:"p50_ms"`
		P99MS int64 `json:"p99_ms"`
		MaxMS int64 `json:"max_ms"`
	} `json:"issue_lag"`
	ClaimsPerSecond struct {
		Peak          float64      `json:"peak"`
		Mean          float64      `json:"mean"`
		BucketSeconds int64        `json:"bucket_seconds"`
		Buckets       []TimeBucket `json:"buckets"`
	} `json:"claims_per_second"`
	Rejected struct {
		// Scope is "instance": the answering instance's count since
		// Since.
		Scope  string           `json:"scope"`
		Since  time.Time        `json:"since"`
		Total  int64            `json:"total"`
		ByCode map[string]int64 `json:"by_code"`
	} `json:"rejected"`
	// WaitingRoom is nil without a room, or once the promotion is retired.
	WaitingRoom *struct {
		Joins     int64 `json:"joins"`
		Admitted  int64 `json:"admitted"`
		Abandoned int64 `json:"abandoned"`
		Waiting   int64 `json:"waiting"`
		Spent     int64 `json:"passes_spent"`
	} `json:"waiting_room"`
	Notes []string `json:"notes"`
}

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
