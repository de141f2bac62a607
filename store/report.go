package store

import (
	"context"
	"time"
)

// Reports are the reads behind a promotion's report and the dashboard's
// charts: what the database keeps of a drop's claim times, counted by the
// database whichever instance wrote them. Every [Store] implements it.
type Reports interface {
	// ClaimTimeline counts the promotion's settled claims per bucket of
	// q.Bucket from q.From (rounded down to a whole bucket of Unix time)
	// until q.To: issued rows by accepted_at (Accepted) and by issued_at
	// (Issued, with the longest issued_at − accepted_at among them), dead
	// letters of claims by the time they were dead-lettered. Buckets where
	// nothing happened are left out; the rest come oldest first. Claims
	// accepted but not yet written (still in Redis) are not counted.
	ClaimTimeline(ctx context.Context, promotionID string, q TimelineQuery) ([]TimeBucket, error)
	// ClaimSummary sums up the promotion's issued rows and dead letters:
	// see [ClaimSummary]. A promotion without any has the zero summary,
	// with an empty DeadLetters map (no error).
	ClaimSummary(ctx context.Context, promotionID string) (ClaimSummary, error)
}

// TimelineQuery selects the buckets of [Reports.ClaimTimeline].
type TimelineQuery struct {
	// From and To bound the times counted: From (rounded down to its
	// bucket) included, To excluded.
	From, To time.Time
	// Bucket is the width of a bucket, a whole number of seconds, at least
	// one.
	Bucket time.Duration
}

// TimeBucket is what happened to a promotion's claims in one bucket of
// time.
type TimeBucket struct {
	// At is the bucket's start.
	At time.Time
	// Accepted counts the issued rows accepted in the bucket.
	Accepted int64
	// Issued counts the rows issued in the bucket.
	Issued int64
	// MaxLag is the longest issued_at − accepted_at of the rows issued in
	// the bucket: how old the oldest claim issued then had grown.
	MaxLag time.Duration
	// DeadLettered counts the claims dead-lettered in the bucket (the
	// time of their last failure), whatever their state now.
	DeadLettered int64
}

// ClaimSummary is what the database keeps of a promotion's claims, for
// its report.
type ClaimSummary struct {
	// Issued counts the issued rows, revoked ones included; Revoked those
	// an admin revoked.
	Issued, Revoked int64
	// FirstAcceptedAt and LastAcceptedAt are the earliest and latest
	// accepted_at of the issued rows; LastIssuedAt the latest issued_at.
	// Zero without issued rows.
	FirstAcceptedAt, LastAcceptedAt, LastIssuedAt time.Time
	// LagP50, LagP99 and LagMax are the nearest-rank 50th and 99th
	// percentiles and the maximum of issued_at − accepted_at over the
	// issued rows, at millisecond precision.
	LagP50, LagP99, LagMax time.Duration
	// DeadLetters counts the dead letters of claims (rank above 0) by
	// state (DeadFailed, DeadReplayed, DeadVoided); states without any are
	// left out.
	DeadLetters map[string]int64
}

// NearestRank is the 0-based index of the nearest-rank p-th quantile
// (0 < p <= 1) of n sorted values: the smallest value at least a fraction
// p of the values are at or below. Both backends compute percentiles so.
func NearestRank(p float64, n int64) int64 {
	if n <= 0 {
		return 0
	}
	k := int64(p*float64(n)+0.999999999) - 1
	return min(max(k, 0), n-1)
}
