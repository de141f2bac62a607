package postgres_test

import (
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/postgres"
)

// TestEventsLateCommit plays the case a feed paged by seq must not lose: a
// transaction takes seq 1, another takes seqs 2 and 3 and commits first. A
// reader that came between would see 2 and 3, page past 1, and never read
// it. The reader waits for the late transaction instead, and reads all
// three in order.
func TestEventsLateCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t).(*postgres.Store)

	late, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = late.Rollback(ctx) }()
	if _, err := late.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, postgres.OutboxLockKey); err != nil {
		t.Fatal(err)
	}
	if _, err := late.Exec(ctx, `INSERT INTO events (id, type, at, promotion_id)
		VALUES ($1, 'promotion.opened', now(), 'late')`, store.EventID(store.EventPromotionOpened, "late")); err != nil {
		t.Fatal(err)
	}
	// A writer that starts later commits first.
	if _, err := s.IssueBatch(ctx, []store.Issue{{ClaimID: "early#1", PromotionID: "early", UserID: "u1",
		Rank: 1, Slot: 1, AcceptedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}

	got := make(chan []store.Event, 1)
	go func() {
		evs, err := s.Events(ctx, 0, nil, 10)
		if err != nil {
			t.Error(err)
		}
		got <- evs
	}()
	wait.For(t, 10*time.Second, "the reader waiting for the late writer", func() bool {
		var waiting int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting)
		return err == nil && waiting > 0
	})
	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	evs := <-got
	var keys []string
	for _, e := range evs {
		keys = append(keys, e.Type+" "+e.PromotionID)
	}
	want := []string{"promotion.opened late", "claim.accepted early", "claim.issued early"}
	if len(keys) != len(want) {
		t.Fatalf("read %q, want %q", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] || (i > 0 && evs[i].Seq <= evs[i-1].Seq) {
			t.Fatalf("read %q, want %q in seq order", keys, want)
		}
	}
}
