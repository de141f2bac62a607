package api

import "time"

// TimeBucket is what happened to a promotion's settled claims in one
// bucket of time.
type TimeBucket struct {
	At           time.Time `json:"at"`
	Accepted     int64     `json:"accepted"`
	Issued       int64     `json:"issued"`
	MaxLagMS     int64     `json:"max_lag_ms"`
	DeadLettered int64     `json:"dead_lettered"`
}

// Timeline is the answer of GET /v1/promotions/{id}/timeline: the
// promotion's settled claims per bucket between From and To.
type Timeline struct {
	PromotionID   string       `json:"promotion_id"`
	BucketSeconds int64        `json:"bucket_seconds"`
	From          time.Time    `json:"from"`
	To            time.Time    `json:"to"`
	Buckets       []TimeBucket `json:"buckets"`
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
	IssueLag        IssueLag         `json:"issue_lag"`
	ClaimsPerSecond ClaimRate        `json:"claims_per_second"`
	Rejected        Rejected         `json:"rejected"`
	// WaitingRoom is nil without a room, or once the promotion is retired.
	WaitingRoom *ReportRoom `json:"waiting_room"`
	Notes       []string    `json:"notes"`
}

// IssueLag is a report's issue lag, issued_at − accepted_at over the
// issued claims, in milliseconds; zeros without any.
type IssueLag struct {
	P50MS int64 `json:"p50_ms"`
	P99MS int64 `json:"p99_ms"`
	MaxMS int64 `json:"max_ms"`
}

// ClaimRate is a report's claims per second: the peak and mean over the
// drop and the timeline they come from.
type ClaimRate struct {
	Peak          float64      `json:"peak"`
	Mean          float64      `json:"mean"`
	BucketSeconds int64        `json:"bucket_seconds"`
	Buckets       []TimeBucket `json:"buckets"`
}

// Rejected is a report's claims refused, by code, as the answering
// instance counted them since Since: nothing else keeps them.
type Rejected struct {
	// Scope is "instance": the answering instance's count since Since.
	Scope  string           `json:"scope"`
	Since  time.Time        `json:"since"`
	Total  int64            `json:"total"`
	ByCode map[string]int64 `json:"by_code"`
}

// ReportRoom is a report's waiting room, from Redis while it holds it.
type ReportRoom struct {
	Joins     int64 `json:"joins"`
	Admitted  int64 `json:"admitted"`
	Abandoned int64 `json:"abandoned"`
	Waiting   int64 `json:"waiting"`
	Spent     int64 `json:"passes_spent"`
}
