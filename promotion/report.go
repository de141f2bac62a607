package promotion

import (
	"context"
	"time"

	"github.com/dibsio/dibs/store"
)

// MaxTimelineBuckets bounds the buckets one Timeline read may span.
const MaxTimelineBuckets = 10_000

// Timeline returns the promotion's settled claims counted per bucket (see
// store.Reports.ClaimTimeline): a ValidationError on the field "bucket"
// unless q.Bucket is a whole number of seconds, at least one, and q spans
// at most MaxTimelineBuckets of them; on "to" if q.To is not after
// q.From. ErrNotFound for an unknown promotion.
func (m *Manager) Timeline(ctx context.Context, id string, q store.TimelineQuery) ([]store.TimeBucket, error) {
	switch {
	case q.Bucket < time.Second || q.Bucket%time.Second != 0:
		return nil, invalid("bucket", "must be a whole number of seconds, at least 1s")
	case !q.To.After(q.From):
		return nil, invalid("to", "must be after from")
	case q.To.Sub(q.From)/q.Bucket >= MaxTimelineBuckets:
		return nil, invalid("bucket", "spans more than %d buckets from from to to: take wider buckets", MaxTimelineBuckets)
	}
	if _, err := load(ctx, m.st, id); err != nil {
		return nil, err
	}
	bs, err := m.st.ClaimTimeline(ctx, id, q)
	return bs, domainErr(err)
}

// ClaimSummary returns what the database keeps of the promotion's claims
// (see store.ClaimSummary); ErrNotFound for an unknown promotion.
func (m *Manager) ClaimSummary(ctx context.Context, id string) (store.ClaimSummary, error) {
	if _, err := load(ctx, m.st, id); err != nil {
		return store.ClaimSummary{}, err
	}
	sum, err := m.st.ClaimSummary(ctx, id)
	return sum, domainErr(err)
}

// Events returns up to limit events of the outbox with seq > afterSeq, in
// seq order, of the given types (all if none): the feed (see
// store.EventLog.Events for its ordering guarantee).
func (m *Manager) Events(ctx context.Context, afterSeq int64, types []string, limit int) ([]store.Event, error) {
	return m.st.Events(ctx, afterSeq, types, limit)
}
