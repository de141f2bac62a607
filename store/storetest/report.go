package storetest

import (
	"testing"
	"time"

	"github.com/dibsio/dibs/store"
)

// reportTests are the reads of a promotion's report and charts.
var reportTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"ClaimTimeline", testClaimTimeline},
	{"ClaimSummary", testClaimSummary},
}

// issueAged issues n claims of promotion id, the i-th (1-based) accepted
// i*step before base, and returns when the batch was written (bounds of
// issued_at).
func issueAged(t *testing.T, s store.Store, id string, n int, base time.Time, step time.Duration) (before, after time.Time) {
	t.Helper()
	var is []store.Issue
	for i := 1; i <= n; i++ {
		is = append(is, issue(id, int64(i), "u"+time.Duration(i).String(), 1, base.Add(-time.Duration(i)*step)))
	}
	before = time.Now()
	if _, err := s.IssueBatch(t.Context(), is); err != nil {
		t.Fatal(err)
	}
	return before, time.Now()
}

func testClaimTimeline(t *testing.T, s store.Store) {
	ctx := t.Context()
	base := time.Now().UTC().Truncate(time.Second)
	q := store.TimelineQuery{From: base.Add(-time.Hour), To: base.Add(time.Hour), Bucket: time.Second}
	if got, err := s.ClaimTimeline(ctx, "unknown", q); err != nil || len(got) != 0 {
		t.Fatalf("ClaimTimeline(unknown) = %v, %v; want none", got, err)
	}
	mustCreate(t, s, promo("tl"), promo("other"))
	_, _ = issueAged(t, s, "other", 3, base, time.Second)
	before, after := issueAged(t, s, "tl", 5, base, time.Second)
	for i, d := range []store.DeadLetter{deadLetter("tl", "tl#6", 6, base), deadLetter("tl", "tl#7", 7, base),
		deadLetter("tl", "junk", 0, base)} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatalf("dead letter %d: %v", i, err)
		}
	}
	got, err := s.ClaimTimeline(ctx, "tl", q)
	if err != nil {
		t.Fatal(err)
	}
	var accepted, issued, dead int64
	var maxLag time.Duration
	for i, b := range got {
		if i > 0 && !b.At.After(got[i-1].At) {
			t.Fatalf("buckets out of order: %v", got)
		}
		if b.At.Nanosecond() != 0 {
			t.Fatalf("bucket %v does not start on a second", b.At)
		}
		accepted, issued, dead = accepted+b.Accepted, issued+b.Issued, dead+b.DeadLettered
		maxLag = max(maxLag, b.MaxLag)
		if b.Accepted == 1 {
			if ago := base.Sub(b.At); ago < time.Second || ago > 5*time.Second {
				t.Fatalf("a claim accepted %s before the base is in bucket %v", ago, b.At)
			}
		}
		if b.Issued > 0 && (b.At.After(after) || b.At.Before(before.Truncate(time.Second))) {
			t.Fatalf("rows issued between %v and %v counted at %v", before, after, b.At)
		}
		if b.DeadLettered > 0 && !b.At.Equal(base) {
			t.Fatalf("dead letters at %v counted at %v", base, b.At)
		}
	}
	if accepted != 5 || issued != 5 || dead != 2 {
		t.Fatalf("accepted %d issued %d dead-lettered %d, want 5 5 2 (the other promotion's and non-claims left out): %+v",
			accepted, issued, dead, got)
	}
	if lo, hi := 5*time.Second+before.Sub(base)-time.Millisecond, 5*time.Second+after.Sub(base)+time.Millisecond; maxLag < lo || maxLag > hi {
		t.Fatalf("longest lag %s, want within [%s, %s]", maxLag, lo, hi)
	}

	// A minute's buckets start on the minute; From rounds down to one;
	// To is excluded.
	q = store.TimelineQuery{From: base.Add(-3 * time.Second), To: base.Add(-2 * time.Second), Bucket: time.Minute}
	got, err = s.ClaimTimeline(ctx, "tl", q)
	if err != nil {
		t.Fatal(err)
	}
	var inRange int64
	for _, b := range got {
		if b.At.Second() != 0 || b.At.After(q.From) {
			t.Fatalf("minute bucket at %v for a range from %v", b.At, q.From)
		}
		inRange += b.Accepted
	}
	// From rounded down to its minute takes in the claims accepted 3 to 5 s
	// before the base, if they fall in that minute; never those after To.
	if want := countAccepted(base, 5, time.Second, q.From.Truncate(time.Minute), q.To); inRange != want {
		t.Fatalf("accepted in the minute range %d, want %d", inRange, want)
	}
	if _, err := s.ClaimTimeline(ctx, "tl", store.TimelineQuery{From: base, To: base, Bucket: time.Second / 2}); err == nil {
		t.Fatal("a half-second bucket was taken")
	}
}

// countAccepted counts the claims issueAged accepted within [from, to).
func countAccepted(base time.Time, n int, step time.Duration, from, to time.Time) int64 {
	var c int64
	for i := 1; i <= n; i++ {
		if at := base.Add(-time.Duration(i) * step); !at.Before(from) && at.Before(to) {
			c++
		}
	}
	return c
}

func testClaimSummary(t *testing.T, s store.Store) {
	ctx := t.Context()
	got, err := s.ClaimSummary(ctx, "unknown")
	if err != nil || got.Issued != 0 || got.LagMax != 0 || !got.FirstAcceptedAt.IsZero() || len(got.DeadLetters) != 0 {
		t.Fatalf("ClaimSummary(unknown) = %+v, %v; want zeros", got, err)
	}
	mustCreate(t, s, promo("sum"))
	base := now()
	// Ten claims accepted 10 s, 20 s, … 100 s before base: their lags are
	// those plus the time from base to the write.
	before, after := issueAged(t, s, "sum", 10, base, 10*time.Second)
	for _, d := range []store.DeadLetter{deadLetter("sum", "sum#11", 11, base), deadLetter("sum", "sum#12", 12, base),
		deadLetter("sum", "sum#13", 13, base), deadLetter("sum", "junk", 0, base)} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TransitionDeadLetters(ctx, "sum", []string{"sum#11"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokeIssued(ctx, "sum", []string{"sum#1"}, false, base); err != nil {
		t.Fatal(err)
	}
	got, err = s.ClaimSummary(ctx, "sum")
	if err != nil {
		t.Fatal(err)
	}
	if got.Issued != 10 || got.Revoked != 1 {
		t.Fatalf("issued %d revoked %d, want 10 1", got.Issued, got.Revoked)
	}
	if !got.FirstAcceptedAt.Equal(base.Add(-100*time.Second)) || !got.LastAcceptedAt.Equal(base.Add(-10*time.Second)) {
		t.Fatalf("accepted from %v to %v, want %v to %v", got.FirstAcceptedAt, got.LastAcceptedAt,
			base.Add(-100*time.Second), base.Add(-10*time.Second))
	}
	if got.LastIssuedAt.Before(before.Add(-time.Second)) || got.LastIssuedAt.After(after.Add(time.Second)) {
		t.Fatalf("last issued at %v, want between %v and %v", got.LastIssuedAt, before, after)
	}
	lo, hi := before.Sub(base)-time.Millisecond, after.Sub(base)+time.Millisecond
	for _, c := range []struct {
		name string
		got  time.Duration
		want time.Duration // the nearest rank of the ten lags
	}{{"p50", got.LagP50, 50 * time.Second}, {"p99", got.LagP99, 100 * time.Second}, {"max", got.LagMax, 100 * time.Second}} {
		if c.got < c.want+lo || c.got > c.want+hi || c.got%time.Millisecond != 0 {
			t.Fatalf("%s lag %s, want %s plus [%s, %s], whole milliseconds", c.name, c.got, c.want, lo, hi)
		}
	}
	if want := map[string]int64{store.DeadFailed: 2, store.DeadVoided: 1}; len(got.DeadLetters) != 2 ||
		got.DeadLetters[store.DeadFailed] != 2 || got.DeadLetters[store.DeadVoided] != 1 {
		t.Fatalf("dead letters %v, want %v", got.DeadLetters, want)
	}
}
