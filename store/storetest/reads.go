package storetest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/dibsio/dibs/store"
)

// Reads over claims: counts, highest ranks and claims by rank.

func testCounts(t *testing.T, s store.Store) {
	ctx := t.Context()
	c, err := s.Counts(ctx, "unknown")
	if err != nil || c != (store.Counts{}) {
		t.Fatalf("Counts(unknown) = %+v, %v; want zeros", c, err)
	}
	mustCreate(t, s, promo("cnt"))
	at := now()
	if _, err := s.IssueBatch(ctx, []store.Issue{issue("cnt", 1, "a", 1, at), issue("cnt", 2, "b", 1, at)}); err != nil {
		t.Fatal(err)
	}
	for i := 3; i <= 7; i++ {
		if err := s.RecordDeadLetter(ctx, deadLetter("cnt", fmt.Sprintf("cnt#%d", i), int64(i), at)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TransitionDeadLetters(ctx, "cnt", []string{"cnt#3", "cnt#4"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionDeadLetters(ctx, "cnt", []string{"cnt#5"}, store.DeadReplayed); err != nil {
		t.Fatal(err)
	}
	// A collision's dead letter shares rank 2 with b's issued row: it holds
	// no unit of its own, failed or voided.
	for _, id := range []string{"cnt#2~z", "cnt#2~y"} {
		if err := s.RecordDeadLetter(ctx, deadLetter("cnt", id, 2, at)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TransitionDeadLetters(ctx, "cnt", []string{"cnt#2~y"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	c, err = s.Counts(ctx, "cnt")
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Counts{Issued: 2, Failed: 2, Voided: 2}); c != want {
		t.Fatalf("Counts = %+v, want %+v", c, want)
	}
}

func testMaxRanks(t *testing.T, s store.Store) {
	ctx := t.Context()
	if m, err := s.MaxRanks(ctx, nil); err != nil || len(m) != 0 {
		t.Fatalf("MaxRanks(nil) = %v, %v; want empty", m, err)
	}
	mustCreate(t, s, promo("mr-issued"), promo("mr-dead"), promo("mr-only-dead"), promo("mr-empty"))
	at := now()
	if _, err := s.IssueBatch(ctx, []store.Issue{
		issue("mr-issued", 1, "a", 1, at), issue("mr-issued", 5, "b", 1, at), issue("mr-issued", 2, "c", 1, at),
		issue("mr-dead", 1, "a", 1, at), issue("mr-dead", 3, "b", 1, at),
	}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []store.DeadLetter{
		deadLetter("mr-dead", "mr-dead#9", 9, at),
		deadLetter("mr-only-dead", "mr-only-dead#4", 4, at),
		deadLetter("mr-only-dead", "mr-only-dead!0-1", 0, at), // undecodable: no rank
	} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	// A voided dead letter still holds its rank: the counter must stay above it.
	if _, err := s.TransitionDeadLetters(ctx, "mr-dead", nil, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	got, err := s.MaxRanks(ctx, []string{"mr-issued", "mr-dead", "mr-only-dead", "mr-empty", "mr-unknown"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"mr-issued": 5, "mr-dead": 9, "mr-only-dead": 4, "mr-empty": 0, "mr-unknown": 0}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MaxRanks = %v, want %v", got, want)
	}
}

func testClaimsByRank(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("kc"), promo("kc-other"))
	at := now()
	if _, err := s.IssueBatch(ctx, []store.Issue{
		issue("kc", 1, "a", 1, at), issue("kc", 2, "b", 1, at), issue("kc", 4, "a", 2, at),
		issue("kc-other", 3, "z", 1, at),
	}); err != nil {
		t.Fatal(err)
	}
	failed := deadLetter("kc", "kc#3", 3, at.Add(time.Second))
	redone := deadLetterOf(issue("kc", 4, "a", 2, at), at) // dead-lettered, replayed, then issued
	voided := deadLetter("kc", "kc#5", 5, at)
	replayed := deadLetter("kc", "kc#6", 6, at.Add(2*time.Second))
	for _, d := range []store.DeadLetter{failed, redone, voided, replayed, deadLetter("kc", "kc!0-1", 0, at)} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TransitionDeadLetters(ctx, "kc", []string{"kc#4", "kc#6"}, store.DeadReplayed); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionDeadLetters(ctx, "kc", []string{"kc#5"}, store.DeadVoided); err != nil {
		t.Fatal(err)
	}

	all, err := s.ClaimsByRank(ctx, "kc", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		claimID, user, state string
		rank                 int64
		slot                 int
		fields               bool
	}
	want := []row{
		{"kc#1", "a", store.StateIssued, 1, 1, false},
		{"kc#2", "b", store.StateIssued, 2, 1, false},
		{"kc#3", "user-kc#3", store.DeadFailed, 3, 1, true},
		{"kc#4", "a", store.StateIssued, 4, 2, false},
		{"kc#5", "user-kc#5", store.DeadVoided, 5, 1, true},
		{"kc#6", "user-kc#6", store.DeadReplayed, 6, 1, true},
	}
	if len(all) != len(want) {
		t.Fatalf("ClaimsByRank = %+v, want %d claims", all, len(want))
	}
	for i, c := range all {
		g := row{c.ClaimID, c.UserID, c.State, c.Rank, c.Slot, c.Fields != nil}
		if g != want[i] {
			t.Errorf("claim %d = %+v, want %+v", i, g, want[i])
		}
		if c.At.Location() != time.UTC {
			t.Errorf("claim %s: At %v not in UTC", c.ClaimID, c.At)
		}
	}
	if !all[2].At.Equal(failed.At) || !all[5].At.Equal(replayed.At) {
		t.Errorf("dead letters' At = %v, %v; want %v, %v", all[2].At, all[5].At, failed.At, replayed.At)
	}
	if !reflect.DeepEqual(all[5].Fields, replayed.Fields) {
		t.Errorf("replayed claim's fields = %v, want %v", all[5].Fields, replayed.Fields)
	}
	if all[0].At.Before(at.Add(-time.Minute)) || all[0].At.After(time.Now().Add(time.Minute)) {
		t.Errorf("issued row's At = %v, want about now", all[0].At)
	}

	rest, err := s.ClaimsByRank(ctx, "kc", 4, 100)
	if err != nil || len(rest) != 2 || rest[0].Rank != 5 || rest[1].Rank != 6 {
		t.Fatalf("after rank 4: %+v, %v; want ranks 5 and 6", rest, err)
	}
	if none, err := s.ClaimsByRank(ctx, "kc", 6, 100); err != nil || len(none) != 0 {
		t.Fatalf("after the last rank: %+v, %v; want none", none, err)
	}
	if none, err := s.ClaimsByRank(ctx, "kc", 0, 0); err != nil || len(none) != 0 {
		t.Fatalf("limit 0: %+v, %v; want none", none, err)
	}
	if none, err := s.ClaimsByRank(ctx, "kc-unknown", 0, 10); err != nil || len(none) != 0 {
		t.Fatalf("unknown promotion: %+v, %v; want none", none, err)
	}
}

// testClaimsByRankPaging walks a promotion of a few thousand claims, dead
// letters interleaved, in small pages: every rank once, in order.
func testClaimsByRankPaging(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, promo("kp"))
	const n = 2500
	at := now()
	var batch []store.Issue
	for r := int64(1); r <= n; r++ {
		if r%97 == 0 {
			if err := s.RecordDeadLetter(ctx, deadLetter("kp", fmt.Sprintf("kp#%d", r), r, at)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		batch = append(batch, issue("kp", r, fmt.Sprintf("u%d", r), 1, at))
	}
	// Issue in shuffled order: rank order must come from the query, not insertion.
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	if _, err := s.IssueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var (
		after int64
		pages int
	)
	for {
		page, err := s.ClaimsByRank(ctx, "kp", after, 300)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 300 {
			t.Fatalf("page of %d, limit 300", len(page))
		}
		pages++
		for _, c := range page {
			if c.Rank != after+1 {
				t.Fatalf("rank %d after %d: a rank was skipped or repeated", c.Rank, after)
			}
			wantState := store.StateIssued
			if c.Rank%97 == 0 {
				wantState = store.DeadFailed
			}
			if c.State != wantState {
				t.Fatalf("rank %d state %s, want %s", c.Rank, c.State, wantState)
			}
			after = c.Rank
		}
	}
	if after != n || pages != (n+299)/300 {
		t.Fatalf("walked to rank %d in %d pages, want %d in %d", after, pages, n, (n+299)/300)
	}
}

// testCountsSkipNonClaims: a dead letter of an entry that was no claim
// (undecodable, rank 0) is listed but not counted: it holds no unit.
func testCountsSkipNonClaims(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := now()
	garbage := deadLetter("nc", "nc!1-0", 0, at)
	claimed := deadLetter("nc", "nc#1", 1, at)
	for _, d := range []store.DeadLetter{garbage, claimed} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := s.Counts(ctx, "nc"); err != nil || c != (store.Counts{Failed: 1}) {
		t.Fatalf("Counts = %+v, %v; want 1 failed", c, err)
	}
	if ds, err := s.ListDeadLetters(ctx, "nc", "", 10); err != nil || len(ds) != 2 {
		t.Fatalf("ListDeadLetters = %v, %v; want both listed", claimIDs(ds), err)
	}
}
