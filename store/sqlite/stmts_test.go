package sqlite

import (
	"slices"
	"testing"

	"github.com/dibsio/dibs/store"
)

func TestInsertRows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n      int
		pieces []int
	}{
		{n: 1, pieces: []int{1}},
		{n: 10, pieces: []int{10}},
		{n: maxSmallInsert, pieces: []int{maxSmallInsert}},
		{n: maxSmallInsert + 1, pieces: []int{maxSmallInsert, 1}},
		{n: 100, pieces: []int{64, 36}},
		{n: 200, pieces: []int{128, 64, 8}},
		{n: 999, pieces: []int{512, 256, 128, 64, 39}},
		{n: insertChunk, pieces: []int{insertChunk}},
		{n: 2*insertChunk + 130, pieces: []int{insertChunk, insertChunk, 128, 2}},
	}
	for _, tt := range tests {
		var pieces []int
		for left := tt.n; left > 0; {
			p := insertRows(left)
			pieces = append(pieces, p)
			left -= p
		}
		if !slices.Equal(pieces, tt.pieces) {
			t.Errorf("%d rows go in pieces %v, want %v", tt.n, pieces, tt.pieces)
		}
	}
}

// TestInsertStmts checks that each row count is prepared once, after the
// transaction that first needed it, and that the statements serve later
// batches with the same outcomes.
func TestInsertStmts(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := t.Context()
	call := func(batch []store.Issue, want store.Outcome) {
		t.Helper()
		out, err := s.IssueBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range out {
			if o != want {
				t.Fatalf("issue %d of %d: %s, want %s", i, len(batch), o, want)
			}
		}
	}
	// The loop prepares a group's missed statements before it takes the
	// next call, so once a call is answered every earlier call's
	// statements are prepared.
	call(issues(1, 10), store.Inserted)  // 10 rows: prepared after
	call(issues(11, 20), store.Inserted) // 10 rows again: prepared already
	call(issues(1, 10), store.Duplicate) // redelivery through the prepared insert
	call(issues(21, 23), store.Inserted) // 3 rows: prepared after
	call(issues(24, 24), store.Inserted) // 1 row: prepared after
	call(issues(25, 25), store.Inserted) // answered once the 1-row insert is prepared
	// Each batch also writes two events per claim inserted: 20, 6 and 2
	// rows.
	if n := s.inserts.prepared.Load(); n != 6 {
		t.Fatalf("%d statements prepared, want 6 (issued: 10, 3 and 1 rows; events: 20, 6 and 2)", n)
	}
	call(issues(100, 100+insertChunk+maxSmallInsert+9), store.Inserted) // 1000, 64 and 10 rows; events 1000, 1000, 128 and 20
	call(issues(26, 26), store.Inserted)
	if n := s.inserts.prepared.Load(); n != 10 {
		t.Fatalf("%d statements prepared, want 10 (also issued 1000 and 64 rows; events 1000 and 128)", n)
	}
	if got := s.inserts.rowCounts(insertIssued); !slices.Equal(got, []int{1, 3, 10, 64, 1000}) {
		t.Fatalf("issued inserts prepared for %v rows", got)
	}
}

// rowCounts returns the row counts of m prepared so far, in order.
func (c *insertStmts) rowCounts(m *multiInsert) []int {
	var out []int
	for k := range c.stmts {
		if k.m == m {
			out = append(out, k.n)
		}
	}
	slices.Sort(out)
	return out
}
