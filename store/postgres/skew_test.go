package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/pgtest"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/postgres"
)

// skewSetup makes a migrated store with promotion p, and, if deadLettered,
// one failed dead letter, p#1.
func skewSetup(t *testing.T, deadLettered bool) *postgres.Store {
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
	if deadLettered {
		if err := s.RecordDeadLetter(ctx, skewDeadLetter()); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// skewDeadLetter is claim p#1 dead-lettered.
func skewDeadLetter() store.DeadLetter {
	return store.DeadLetter{ClaimID: "p#1", PromotionID: "p", UserID: "u", Rank: 1, Slot: 1,
		Reason: "x", Deliveries: 5, State: store.DeadFailed, At: time.Now(), Fields: map[string]string{"claim_id": "p#1"}}
}

// skewIssue is claim p#1 as issued.
func skewIssue() store.Issue {
	return store.Issue{ClaimID: "p#1", PromotionID: "p", UserID: "u", Rank: 1, Slot: 1, AcceptedAt: time.Now()}
}

// gateKey is the advisory lock a gate holds; no claim id hashes to it in
// these tests.
const gateKey = 0x67617465

// holdGate makes every statement that writes claim p#1 into table (an
// insert into issued, or the update of a dead letter to voided) wait, once
// it has written the row and before its transaction can commit, until the
// returned release is called. The test holds the gate's advisory lock on a
// connection of its own; a trigger makes the writer wait for that lock.
// release is also called when the test ends.
func holdGate(t *testing.T, s *postgres.Store, table string) (release func()) {
	t.Helper()
	ctx := t.Context()
	event := "INSERT"
	when := "NEW.claim_id = 'p#1'"
	if table == "dead_letters" {
		event = "UPDATE"
		when += " AND NEW.state = 'voided'"
	}
	for _, q := range []string{
		fmt.Sprintf(`CREATE FUNCTION gate_wait() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				PERFORM pg_advisory_xact_lock_shared(%d);
				RETURN NULL;
			END $$`, gateKey),
		fmt.Sprintf(`CREATE TRIGGER gate AFTER %s ON %s FOR EACH ROW WHEN (%s) EXECUTE FUNCTION gate_wait()`,
			event, table, when),
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(gateKey)); err != nil {
		conn.Release()
		t.Fatal(err)
	}
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(gateKey)); err != nil {
			t.Error(err)
		}
		conn.Release()
	}
	t.Cleanup(release)
	return release
}

// goDo runs op in a goroutine and returns a channel closed when it returned.
func goDo(op func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		op()
	}()
	return done
}

// waitBlocked waits until n sessions of the test's database wait on a lock,
// or done (if not nil) is closed.
func waitBlocked(t *testing.T, s *postgres.Store, n int, done <-chan struct{}) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var waiting int
		if err := s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		select {
		case <-done:
			return
		case <-deadline.C:
			t.Fatalf("%d sessions wait on a lock after 10s, want %d", waiting, n)
		case <-tick.C:
		}
	}
}

// waitDone waits, up to a deadline, until done is closed.
func waitDone(t *testing.T, what string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s not done after 10s", what)
	}
}

// TestVoidWaitsForIssueInFlight: a claim whose issue is being committed is
// dead-lettered by a second delivery and voided meanwhile. Whether or not
// its dead letter existed before the issue started, the void must skip it
// (it finds the claim issued): voiding it too would return to stock a unit
// the issued claim holds.
func TestVoidWaitsForIssueInFlight(t *testing.T) {
	t.Parallel()
	for _, deadLettered := range []bool{false, true} {
		t.Run(fmt.Sprintf("dead letter before=%t", deadLettered), func(t *testing.T) {
			t.Parallel()
			s := skewSetup(t, deadLettered)
			ctx := t.Context()
			release := holdGate(t, s, "issued")
			var (
				outs       []store.Outcome
				ierr       error
				moved      []store.DeadLetter
				rerr, verr error
			)
			issued := goDo(func() { outs, ierr = s.IssueBatch(ctx, []store.Issue{skewIssue()}) })
			// The issue has written its row and waits at the gate.
			waitBlocked(t, s, 1, issued)
			voided := goDo(func() {
				if rerr = s.RecordDeadLetter(ctx, skewDeadLetter()); rerr != nil {
					return
				}
				moved, verr = s.TransitionDeadLetters(ctx, "p", []string{"p#1"}, store.DeadVoided)
			})
			waitBlocked(t, s, 2, voided)
			release()
			waitDone(t, "IssueBatch", issued)
			waitDone(t, "dead letter and void", voided)

			if ierr != nil || len(outs) != 1 || outs[0] != store.Inserted {
				t.Fatalf("IssueBatch = %v, %v; want [inserted]", outs, ierr)
			}
			if rerr != nil || verr != nil {
				t.Fatalf("RecordDeadLetter: %v; TransitionDeadLetters: %v", rerr, verr)
			}
			if len(moved) != 0 {
				t.Errorf("the void moved %d claims, want none: p#1 is issued", len(moved))
			}
			// The dead letter stays listed, but its unit is counted once,
			// as issued.
			if c, err := s.Counts(ctx, "p"); err != nil || c != (store.Counts{Issued: 1}) {
				t.Fatalf("Counts = %+v, %v; want 1 issued, none failed or voided", c, err)
			}
		})
	}
}

// TestIssueWaitsForVoidInFlight: an issue of a claim being voided at that
// moment is refused once the void commits.
func TestIssueWaitsForVoidInFlight(t *testing.T) {
	t.Parallel()
	s := skewSetup(t, true)
	ctx := t.Context()
	release := holdGate(t, s, "dead_letters")
	var (
		moved []store.DeadLetter
		verr  error
		outs  []store.Outcome
		ierr  error
	)
	voided := goDo(func() { moved, verr = s.TransitionDeadLetters(ctx, "p", []string{"p#1"}, store.DeadVoided) })
	waitBlocked(t, s, 1, voided)
	issued := goDo(func() { outs, ierr = s.IssueBatch(ctx, []store.Issue{skewIssue()}) })
	waitBlocked(t, s, 2, issued)
	release()
	waitDone(t, "void", voided)
	waitDone(t, "IssueBatch", issued)

	if verr != nil || len(moved) != 1 {
		t.Fatalf("void moved %d, %v; want p#1", len(moved), verr)
	}
	if ierr != nil || len(outs) != 1 || outs[0] != store.Conflict {
		t.Fatalf("issue of a claim being voided: %v %v, want a conflict", outs, ierr)
	}
	if c, err := s.Counts(ctx, "p"); err != nil || c != (store.Counts{Voided: 1}) {
		t.Fatalf("Counts = %+v, %v; want 1 voided, none issued", c, err)
	}
}
