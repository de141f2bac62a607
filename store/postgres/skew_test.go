package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dibsio/dibs/internal/pgtest"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/postgres"
)

// skewSetup makes a promotion with one failed dead letter, p#1.
func skewSetup(t *testing.T) *postgres.Store {
	t.Helper()
	s := newStore(t, pgtest.URL(t))
	ctx := t.Context()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour)
	if err := s.CreatePromotion(ctx, store.Promotion{ID: "p", Name: "p", Mode: store.ModeFirstCome, Kind: store.KindCoupon,
		Stock: 1, PerUserLimit: 1, StartsAt: start, EndsAt: start.Add(48 * time.Hour), CreatedAt: start}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDeadLetter(ctx, store.DeadLetter{ClaimID: "p#1", PromotionID: "p", UserID: "u", Rank: 1, Slot: 1,
		Reason: "x", Deliveries: 5, State: store.DeadFailed, At: time.Now(), Fields: map[string]string{"claim_id": "p#1"}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// runWhileHeld runs op while tx is open, waits until op either finished or
// waits on a lock in the database, then commits tx and waits for op.
func runWhileHeld(t *testing.T, s *postgres.Store, tx pgx.Tx, op func()) {
	t.Helper()
	ctx := t.Context()
	done := make(chan struct{})
	go func() {
		defer close(done)
		op()
	}()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for waiting := false; !waiting; {
		select {
		case <-done:
			waiting = true
		case <-deadline.C:
			t.Fatal("the operation neither finished nor waited on a lock")
		case <-tick.C:
			var n int
			if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			waiting = n > 0
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
}

// TestVoidWaitsForIssueInFlight: a void of a claim whose issue is committing
// at that moment must not succeed as well (that would return a unit the
// issued claim holds).
func TestVoidWaitsForIssueInFlight(t *testing.T) {
	t.Parallel()
	s := skewSetup(t)
	ctx := t.Context()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	// What IssueBatch does, held open before its commit.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM dead_letters WHERE claim_id = 'p#1' FOR SHARE`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO issued (claim_id, promotion_id, user_id, rank, slot, accepted_at)
		VALUES ('p#1', 'p', 'u', 1, 1, now())`); err != nil {
		t.Fatal(err)
	}
	var moved []store.DeadLetter
	var terr error
	runWhileHeld(t, s, tx, func() {
		moved, terr = s.TransitionDeadLetters(ctx, "p", []string{"p#1"}, store.DeadVoided)
	})
	if terr != nil || len(moved) != 0 {
		t.Fatalf("void moved %d (%v) while the claim was being issued", len(moved), terr)
	}
}

// TestIssueWaitsForVoidInFlight: an issue of a claim being voided at that
// moment is refused once the void commits.
func TestIssueWaitsForVoidInFlight(t *testing.T) {
	t.Parallel()
	s := skewSetup(t)
	ctx := t.Context()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	// What a void does, held open before its commit.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM dead_letters WHERE claim_id = 'p#1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE dead_letters SET state = 'voided', applied = false, moved_at = now() WHERE claim_id = 'p#1'`); err != nil {
		t.Fatal(err)
	}
	var outs []store.Outcome
	var ierr error
	runWhileHeld(t, s, tx, func() {
		outs, ierr = s.IssueBatch(ctx, []store.Issue{{ClaimID: "p#1", PromotionID: "p", UserID: "u", Rank: 1, Slot: 1, AcceptedAt: time.Now()}})
	})
	if ierr != nil || len(outs) != 1 || outs[0] != store.Conflict {
		t.Fatalf("issue of a claim being voided: %v %v, want a conflict", outs, ierr)
	}
}
