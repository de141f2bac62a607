package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dibsio/dibs/store"
)

// TestClaimsByRankStoredTimes reads claims whose times were written by
// other tools, in every form SQLite can hold: each is read back, and a time
// that cannot be read leaves the claim's At zero without failing the page.
func TestClaimsByRankStoredTimes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "dibs.db")
	s := openPath(t, path)
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()

	at := time.Date(2026, 11, 21, 9, 30, 15, 0, time.UTC)
	ms := at.Add(250 * time.Millisecond)
	tests := []struct {
		stored string
		want   time.Time // zero: unreadable
	}{
		{"2026-11-21T09:30:15.000000Z", at},
		{"2026-11-21T09:30:15Z", at},
		{"2026-11-21T18:30:15.25+09:00", ms},
		{"2026-11-21 09:30:15", at},
		{"2026-11-21 09:30:15.250", ms},
		{"2026-11-21 04:30:15-05:00", at},
		{fmt.Sprint(ms.UnixMilli()), ms},
		{fmt.Sprint(at.Unix()), at},
		{"yesterday-ish", time.Time{}},
		{"", time.Time{}},
	}
	for i, tt := range tests {
		rank := int64(i + 1)
		table, col := "issued", "issued_at"
		q := `INSERT INTO issued (claim_id, promotion_id, user_id, rank, slot, accepted_at, issued_at)
			VALUES (?1, 'ts', 'u' || ?2, ?2, 1, ?3, ?3)`
		if i%2 == 1 {
			table, col = "dead_letters", "at"
			q = `INSERT INTO dead_letters (claim_id, promotion_id, user_id, rank, slot, reason, deliveries, state, at)
				VALUES (?1, 'ts', 'u' || ?2, ?2, 1, 'failed', 5, 'failed', ?3)`
		}
		if _, err := raw.ExecContext(ctx, q, fmt.Sprintf("ts#%d", rank), rank, tt.stored); err != nil {
			t.Fatalf("%s.%s = %q: %v", table, col, tt.stored, err)
		}
	}
	// Unix milliseconds stored as a number land as text in the STRICT TEXT column.
	if _, err := raw.ExecContext(ctx, `INSERT INTO dead_letters (claim_id, promotion_id, user_id, rank, slot, reason, deliveries, state, at)
		VALUES ('ts#99', 'ts', 'u99', 99, 1, 'failed', 5, 'failed', ?)`, ms.UnixMilli()); err != nil {
		t.Fatal(err)
	}

	var got []store.KnownClaim
	for after := int64(0); ; {
		page, err := s.ClaimsByRank(ctx, "ts", after, 3)
		if err != nil {
			t.Fatalf("ClaimsByRank after %d: %v", after, err)
		}
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1].Rank
	}
	if len(got) != len(tests)+1 {
		t.Fatalf("ClaimsByRank returned %d claims, want %d", len(got), len(tests)+1)
	}
	for i, tt := range tests {
		if c := got[i]; !c.At.Equal(tt.want) || (!c.At.IsZero() && c.At.Location() != time.UTC) {
			t.Errorf("claim %s stored at %q: At = %v, want %v", c.ClaimID, tt.stored, c.At, tt.want)
		}
	}
	if last := got[len(tests)]; last.ClaimID != "ts#99" || !last.At.Equal(ms) {
		t.Errorf("claim %s stored at %d: At = %v, want %v", last.ClaimID, ms.UnixMilli(), last.At, ms)
	}
}
