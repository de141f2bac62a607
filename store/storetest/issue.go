package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/store"
)

// Issuing claims: IssueBatch's outcomes, large and concurrent batches.

func testIssueBatchInserted(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("ins"))
	at := now().Add(-time.Minute)
	batch := []store.Issue{
		issue("ins", 1, "alice", 1, at),
		issue("ins", 2, "bob", 1, at.Add(time.Millisecond)),
		issue("ins", 3, "alice", 2, at.Add(2*time.Millisecond)),
	}
	before := now()
	out, err := s.IssueBatch(ctx, batch)
	if err != nil {
		t.Fatalf("IssueBatch: %v", err)
	}
	after := now().Add(time.Second)
	want := []store.Outcome{store.Inserted, store.Inserted, store.Inserted}
	if !slices.Equal(out, want) {
		t.Fatalf("outcomes %v, want %v", out, want)
	}

	rows, err := s.ListIssued(ctx, "ins", "alice")
	if err != nil {
		t.Fatalf("ListIssued: %v", err)
	}
	if len(rows) != 2 {
		t.Fatalf("alice has %d issued rows, want 2: %+v", len(rows), rows)
	}
	for i, is := range []store.Issue{batch[0], batch[2]} {
		r := rows[i]
		if r.ClaimID != is.ClaimID || r.PromotionID != is.PromotionID || r.UserID != is.UserID ||
			r.Rank != is.Rank || r.Slot != is.Slot || !r.AcceptedAt.Equal(is.AcceptedAt) {
			t.Errorf("row %d = %+v, want %+v", i, r, is)
		}
		if r.IssuedAt.Before(before.Add(-time.Second)) || r.IssuedAt.After(after) {
			t.Errorf("row %d IssuedAt = %v, want between %v and %v", i, r.IssuedAt, before, after)
		}
		if r.AcceptedAt.Location() != time.UTC || r.IssuedAt.Location() != time.UTC {
			t.Errorf("row %d times not in UTC: %+v", i, r)
		}
	}
	if rows, err := s.ListIssued(ctx, "ins", "nobody"); err != nil || len(rows) != 0 {
		t.Fatalf("ListIssued(nobody) = %+v, %v; want none", rows, err)
	}
	c, err := s.Counts(ctx, "ins")
	if err != nil {
		t.Fatal(err)
	}
	if c != (store.Counts{Issued: 3}) {
		t.Fatalf("Counts = %+v, want 3 issued", c)
	}

	out, err = s.IssueBatch(ctx, nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("IssueBatch(nil) = %v, %v; want no outcomes", out, err)
	}
}

// testIssueBatchOutcomes sends one batch of every outcome beside claims
// already issued: each gets its own, only the inserted rows are written,
// and the rows held are unchanged.
func testIssueBatchOutcomes(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("out"), promo("other"))
	at := now()
	existing := []store.Issue{
		issue("out", 1, "alice", 1, at),
		issue("out", 2, "bob", 1, at),
	}
	if out, err := s.IssueBatch(ctx, existing); err != nil || !slices.Equal(out, []store.Outcome{store.Inserted, store.Inserted}) {
		t.Fatalf("seed batch: %v, %v", out, err)
	}
	tests := outcomeCases(existing[0], at)
	batch := make([]store.Issue, len(tests))
	for i, tt := range tests {
		batch[i] = tt.issue
	}
	out, err := s.IssueBatch(ctx, batch)
	if err != nil {
		t.Fatalf("IssueBatch: %v", err)
	}
	if len(out) != len(tests) {
		t.Fatalf("%d outcomes for %d issues", len(out), len(tests))
	}
	for i, tt := range tests {
		if out[i] != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, out[i], tt.want)
		}
	}
	checkHeldRows(t, s, at)

	// A whole batch of redeliveries is all duplicates.
	out, err = s.IssueBatch(ctx, existing)
	if err != nil || !slices.Equal(out, []store.Outcome{store.Duplicate, store.Duplicate}) {
		t.Fatalf("redelivered batch: %v, %v; want duplicates", out, err)
	}
}

// outcomeCase is one issue of testIssueBatchOutcomes's batch and the
// outcome it must get.
type outcomeCase struct {
	name  string
	issue store.Issue
	want  store.Outcome
}

// outcomeCases are the batch of testIssueBatchOutcomes, in order, beside
// out#1 (alice's, held as first) and out#2 (bob's) issued at at.
func outcomeCases(first store.Issue, at time.Time) []outcomeCase {
	sameRank := issue("out", 1, "carol", 1, at)
	sameRank.ClaimID = "out#other-1" // another claim holding rank 1
	sameSlot := issue("out", 10, "bob", 1, at)
	changed := issue("out", 2, "bob", 2, at) // claim out#2 with another slot
	redelivered := first
	redelivered.AcceptedAt = at.Add(time.Second) // the time is not the claim's identity
	fresh := issue("out", 3, "dave", 1, at)
	inBatchRank := issue("out", 3, "erin", 1, at)
	inBatchRank.ClaimID = "out#other-3" // rank 3 taken earlier in this batch
	otherPromo := issue("other", 1, "alice", 1, at)
	return []outcomeCase{
		{"redelivery", redelivered, store.Duplicate},
		{"rank held by another claim", sameRank, store.Conflict},
		{"user slot held by another claim", sameSlot, store.Conflict},
		{"same claim other content", changed, store.Conflict},
		{"new", fresh, store.Inserted},
		{"repeated in the batch", fresh, store.Duplicate},
		{"rank taken earlier in the batch", inBatchRank, store.Conflict},
		{"same rank in another promotion", otherPromo, store.Inserted},
	}
}

// checkHeldRows checks that nothing but the inserted rows was written, and
// that the held rows are unchanged.
func checkHeldRows(t *testing.T, s store.Store, at time.Time) {
	t.Helper()
	ctx := t.Context()
	c, err := s.Counts(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	if c.Issued != 3 {
		t.Fatalf("Counts.Issued = %d, want 3", c.Issued)
	}
	rows, err := s.ListIssued(ctx, "out", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ClaimID != "out#2" || rows[0].Slot != 1 {
		t.Fatalf("bob's rows = %+v, want only out#2 in slot 1", rows)
	}
	rows, err = s.ListIssued(ctx, "out", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !rows[0].AcceptedAt.Equal(at) {
		t.Fatalf("alice's rows = %+v, want the first delivery's", rows)
	}
}

// testIssueBatchLarge crosses the backends' statement chunking.
func testIssueBatchLarge(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("large"))
	const n = 2500
	at := now()
	batch := make([]store.Issue, 0, n)
	for r := int64(1); r <= n; r++ {
		batch = append(batch, issue("large", r, fmt.Sprintf("u%d", r), 1, at))
	}
	// Half of them already issued, scattered over the chunks.
	var half []store.Issue
	for i := 0; i < n; i += 2 {
		half = append(half, batch[i])
	}
	if _, err := s.IssueBatch(ctx, half); err != nil {
		t.Fatalf("first half: %v", err)
	}
	out, err := s.IssueBatch(ctx, batch)
	if err != nil {
		t.Fatalf("IssueBatch of %d: %v", n, err)
	}
	for i, o := range out {
		want := store.Inserted
		if i%2 == 0 {
			want = store.Duplicate
		}
		if o != want {
			t.Fatalf("issue %d: %s, want %s", i, o, want)
		}
	}
	c, err := s.Counts(ctx, "large")
	if err != nil {
		t.Fatal(err)
	}
	if c.Issued != n {
		t.Fatalf("Counts.Issued = %d, want %d", c.Issued, n)
	}
}

// testIssueBatchConcurrent has 16 writers issue overlapping batches of the
// same claims in different orders: each claim must be inserted exactly once.
func testIssueBatchConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("conc"))
	const (
		writers = 16
		claims  = 400
		batch   = 25
	)
	at := now()
	all := make([]store.Issue, claims)
	for i := range all {
		all[i] = issue("conc", int64(i+1), fmt.Sprintf("u%d", i%200), i/200+1, at)
	}

	var (
		wg   sync.WaitGroup
		tl   = newTally()
		errs = make([]error, writers)
	)
	for w := range writers {
		// Each writer covers every claim, starting at a different place, in
		// batches that overlap other writers' batches.
		order := slices.Clone(all)
		rnd := rand.New(rand.NewPCG(uint64(w), 7))
		rnd.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		wg.Go(func() {
			for start := 0; start < len(order); start += batch {
				b := order[start:min(start+batch, len(order))]
				out, err := s.IssueBatch(ctx, b)
				if err == nil {
					err = tl.add(b, out)
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	tl.check(t, claims)
	if want := claims*writers - claims; tl.dups != want {
		t.Errorf("%d duplicates, want %d", tl.dups, want)
	}
	c, err := s.Counts(ctx, "conc")
	if err != nil {
		t.Fatal(err)
	}
	if c.Issued != claims {
		t.Fatalf("Counts.Issued = %d, want %d", c.Issued, claims)
	}
}
