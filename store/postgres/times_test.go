package postgres_test

import "testing"

// TestClaimsByRankInfiniteTimes: 'infinity' and '-infinity' are valid
// timestamptz values with no time.Time; the rebuild's read returns such
// claims with a zero At instead of failing the page.
func TestClaimsByRankInfiniteTimes(t *testing.T) {
	t.Parallel()
	s := skewSetup(t, false)
	ctx := t.Context()
	for _, q := range []string{
		`INSERT INTO issued (claim_id, promotion_id, user_id, rank, slot, accepted_at, issued_at)
			VALUES ('p#1', 'p', 'a', 1, 1, now(), 'infinity'), ('p#3', 'p', 'c', 3, 1, now(), now())`,
		`INSERT INTO dead_letters (claim_id, promotion_id, user_id, rank, slot, reason, deliveries, state, at)
			VALUES ('p#2', 'p', 'b', 2, 1, 'failed', 5, 'failed', '-infinity')`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ClaimsByRank(ctx, "p", 0, 10)
	if err != nil {
		t.Fatalf("ClaimsByRank: %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("ClaimsByRank = %+v, want 3 claims", got)
	}
	if !got[0].At.IsZero() || !got[1].At.IsZero() || got[2].At.IsZero() {
		t.Fatalf("At = %v, %v, %v; want zero, zero, a time", got[0].At, got[1].At, got[2].At)
	}
}
