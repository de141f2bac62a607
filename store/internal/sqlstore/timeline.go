package sqlstore

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/dibsio/dibs/store"
)

// TimelineBounds checks q and returns its bucket in whole seconds and its
// bounds, From rounded down to its bucket.
func TimelineBounds(q store.TimelineQuery) (bucket int64, from, to time.Time, err error) {
	if q.Bucket < time.Second || q.Bucket%time.Second != 0 {
		return 0, time.Time{}, time.Time{}, fmt.Errorf("store: a timeline bucket is a whole number of seconds, got %s", q.Bucket)
	}
	bucket = int64(q.Bucket / time.Second)
	sec := q.From.Unix()
	sec -= ((sec % bucket) + bucket) % bucket
	return bucket, time.Unix(sec, 0).UTC(), q.To.UTC(), nil
}

// Timeline gathers the buckets of a ClaimTimeline from the backends'
// grouped reads.
type Timeline struct {
	by map[int64]*store.TimeBucket
}

// NewTimeline returns an empty Timeline.
func NewTimeline() *Timeline {
	return &Timeline{by: map[int64]*store.TimeBucket{}}
}

// At returns the bucket that starts at Unix second sec, made if new.
func (t *Timeline) At(sec int64) *store.TimeBucket {
	b := t.by[sec]
	if b == nil {
		b = &store.TimeBucket{At: time.Unix(sec, 0).UTC()}
		t.by[sec] = b
	}
	return b
}

// Buckets returns the buckets, oldest first.
func (t *Timeline) Buckets() []store.TimeBucket {
	out := make([]store.TimeBucket, 0, len(t.by))
	for _, sec := range slices.Sorted(maps.Keys(t.by)) {
		out = append(out, *t.by[sec])
	}
	return out
}
