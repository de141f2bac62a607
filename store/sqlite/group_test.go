package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/store"
)

func setup(t *testing.T) *Store {
	t.Helper()
	s, err := New(t.Context(), Config{Path: filepath.Join(t.TempDir(), "dibs.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

func issues(from, to int64) []store.Issue {
	var out []store.Issue
	for r := from; r <= to; r++ {
		out = append(out, store.Issue{
			ClaimID: fmt.Sprintf("g#%d", r), PromotionID: "g", UserID: fmt.Sprintf("u%d", r),
			Rank: r, Slot: 1, AcceptedAt: time.Now(),
		})
	}
	return out
}

// holdWriter takes the one write connection, so the group writer waits for
// it with calls queueing up behind; release lets it go.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	conn, err := s.w.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return func() { _ = conn.Close() }
}

// runCalls starts one IssueBatch call per batch, waits until all of them
// are with the group writer (one taken, the rest queued), releases the
// writer and returns the results.
func runCalls(t *testing.T, s *Store, ctxs []context.Context, batches [][]store.Issue) ([][]store.Outcome, []error) {
	t.Helper()
	release := holdWriter(t, s)
	var (
		wg   sync.WaitGroup
		outs = make([][]store.Outcome, len(batches))
		errs = make([]error, len(batches))
	)
	for i := range batches {
		wg.Go(func() { outs[i], errs[i] = s.IssueBatch(ctxs[i], batches[i]) })
	}
	wait.For(t, 10*time.Second, "the calls queue", func() bool { return len(s.reqs) == len(batches)-1 })
	release()
	wg.Wait()
	return outs, errs
}

func TestGroupCommit(t *testing.T) {
	t.Parallel()
	s := setup(t)
	// Overlapping calls: each claim must be inserted once, by the first call
	// of the group that carries it.
	batches := [][]store.Issue{issues(1, 4), issues(3, 6), issues(5, 8), issues(7, 10), issues(1, 10)}
	ctxs := []context.Context{t.Context(), t.Context(), t.Context(), t.Context(), t.Context()}
	before := s.groups.Load()
	outs, errs := runCalls(t, s, ctxs, batches)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := s.groups.Load() - before; n != 1 {
		t.Fatalf("%d transactions for %d calls, want 1", n, len(batches))
	}
	inserted := map[string]int{}
	for i, out := range outs {
		for j, o := range out {
			switch o {
			case store.Inserted:
				inserted[batches[i][j].ClaimID]++
			case store.Duplicate:
			default:
				t.Errorf("call %d issue %d: %s", i, j, o)
			}
		}
	}
	if len(inserted) != 10 {
		t.Fatalf("%d claims inserted, want 10", len(inserted))
	}
	for id, n := range inserted {
		if n != 1 {
			t.Errorf("%s inserted %d times", id, n)
		}
	}
	c, err := s.Counts(t.Context(), "g")
	if err != nil || c.Issued != 10 {
		t.Fatalf("Counts = %+v, %v; want 10 issued", c, err)
	}
}

// TestGroupCallerGone: a call whose caller gave up before the group ran
// writes nothing; the others of the group are written.
func TestGroupCallerGone(t *testing.T) {
	t.Parallel()
	s := setup(t)
	gone, cancel := context.WithCancel(t.Context())
	batches := [][]store.Issue{issues(1, 2), issues(3, 4), issues(5, 6)}
	ctxs := []context.Context{t.Context(), gone, t.Context()}
	release := holdWriter(t, s)
	var (
		wg   sync.WaitGroup
		errs = make([]error, len(batches))
	)
	for i := range batches {
		wg.Go(func() { _, errs[i] = s.IssueBatch(ctxs[i], batches[i]) })
	}
	wait.For(t, 10*time.Second, "the calls queue", func() bool { return len(s.reqs) == len(batches)-1 })
	cancel()
	release()
	wg.Wait()
	if !errors.Is(errs[1], context.Canceled) {
		t.Fatalf("cancelled call: %v, want context.Canceled", errs[1])
	}
	c, err := s.Counts(t.Context(), "g")
	if err != nil {
		t.Fatal(err)
	}
	// Every call's context is checked once the writer is free, so the
	// cancelled call writes nothing and the others are written.
	if errs[0] != nil || errs[2] != nil || c.Issued != 4 {
		t.Fatalf("errors %v, %d issued; want the two live calls' 4", errs, c.Issued)
	}
	rows, err := s.ListIssued(t.Context(), "g", "u3")
	if err != nil || len(rows) != 0 {
		t.Fatalf("the cancelled call was written: %+v, %v", rows, err)
	}
}

// TestGroupFailureIsolated: when one call of a group fails, the group is
// rolled back and the other calls are written in transactions of their own.
// (Not parallel: it sets the package's test hook.)
func TestGroupFailureIsolated(t *testing.T) {
	s := setup(t)
	bad := errors.New("bad call")
	testHookIssue = func(is []store.Issue) error {
		if is[0].Rank == 100 {
			return bad
		}
		return nil
	}
	t.Cleanup(func() { testHookIssue = nil })
	batches := [][]store.Issue{issues(1, 3), issues(100, 101), issues(4, 6)}
	ctxs := []context.Context{t.Context(), t.Context(), t.Context()}
	before := s.groups.Load()
	outs, errs := runCalls(t, s, ctxs, batches)
	if !errors.Is(errs[1], bad) {
		t.Fatalf("bad call: %v, want its own error", errs[1])
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil || len(outs[i]) != 3 || outs[i][0] != store.Inserted {
			t.Fatalf("call %d: %v, %v; want inserted", i, outs[i], errs[i])
		}
	}
	c, err := s.Counts(t.Context(), "g")
	if err != nil || c.Issued != 6 {
		t.Fatalf("Counts = %+v, %v; want 6 issued", c, err)
	}
	if n := s.groups.Load() - before; n < 2 {
		t.Fatalf("%d transactions: the failed group was not retried call by call", n)
	}
}

func TestClosedStore(t *testing.T) {
	t.Parallel()
	s := setup(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.IssueBatch(t.Context(), issues(1, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("IssueBatch on a closed store: %v, want ErrClosed", err)
	}
}

// The group writer asks for a checkpoint every CheckpointClaims claims it
// commits, and the checkpointer runs it on its own connection.
func TestCheckpointerRuns(t *testing.T) {
	t.Parallel()
	s, err := New(t.Context(), Config{Path: filepath.Join(t.TempDir(), "dibs.db"), CheckpointClaims: 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.IssueBatch(t.Context(), issues(1, 10)); err != nil {
		t.Fatal(err)
	}
	if n := s.ckpt.runs.Load(); n != 0 {
		t.Fatalf("%d checkpoints after 10 claims, want none before 20", n)
	}
	if _, err := s.IssueBatch(t.Context(), issues(11, 30)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "a checkpoint after 30 claims", func() bool { return s.ckpt.runs.Load() > 0 })
	var busy, logged, copied int
	if err := s.w.QueryRowContext(t.Context(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logged, &copied); err != nil {
		t.Fatal(err)
	}
	if busy != 0 || copied != logged {
		t.Fatalf("checkpoint after the checkpointer's: busy %d, %d of %d frames copied", busy, copied, logged)
	}
}

func TestConfigCheckpointClaims(t *testing.T) {
	t.Parallel()
	_, err := New(t.Context(), Config{Path: filepath.Join(t.TempDir(), "dibs.db"), CheckpointClaims: -1})
	if err == nil {
		t.Fatal("New with CheckpointClaims -1: no error")
	}
}
