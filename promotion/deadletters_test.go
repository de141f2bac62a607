package promotion_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// TestLostAckIsNoDeadLetter: a claim whose row was committed but whose
// acknowledgement was lost is redelivered until its deliveries run out. It
// must then be recognised as issued — not recorded as a dead letter whose
// void would return its unit to stock and oversell.
func TestLostAckIsNoDeadLetter(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	sc := fastStream()
	sc.MaxDeliveries = 2
	// The entry below is left as by an instance that died: no hint tells
	// of it, so if the promotion went idle here before it was written, it
	// is found at the idle re-check, here as often as any re-check.
	m := w.start(t, promotion.Config{Prefix: w.prefix, Instance: "a", Stream: sc,
		RecheckInterval: 50 * time.Millisecond, IdleRecheckInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	create(t, m, promotion.Promotion{ID: "lost-ack", Stock: 1})
	res, err := m.Claim(ctx, "lost-ack", "u1", "")
	if err != nil {
		t.Fatal(err)
	}
	waitCounts(t, m, "lost-ack", 1, 0)

	// Recreate what a lost acknowledgement leaves, with the pool stopped so
	// it cannot take the entry first: the claim's status still pending, and
	// its entry pending in the group, held by a consumer that died after
	// many deliveries.
	if err := m.Registry().StopPool(ctx, "lost-ack"); err != nil {
		t.Fatal(err)
	}
	k := claim.KeysFor(w.prefix, "lost-ack")
	c := w.client
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Do(ctx, c.B().Hset().Key(k.Status()).FieldValue().FieldValue("1", "p").Build()).Error())
	id, err := c.Do(ctx, c.B().Xadd().Key(k.Stream()).Id("*").FieldValue().
		FieldValue("claim_id", res.ClaimID).FieldValue("user", "u1").FieldValue("rank", "1").
		FieldValue("slot", "1").FieldValue("at", "1").Build()).ToString()
	must(err)
	must(c.Do(ctx, c.B().Xreadgroup().Group(claim.Group, "ghost").Count(1).Streams().Key(k.Stream()).Id(">").Build()).Error())
	must(c.Do(ctx, c.B().Xclaim().Key(k.Stream()).Group(claim.Group).Consumer("ghost").MinIdleTime("0").
		Id(id).Idle(3_600_000).Retrycount(7).Build()).Error())
	// The re-check loop sees the pending entry and starts the pool, whose
	// reclaim finds its deliveries spent.

	wait.For(t, 30*time.Second, "the redelivered entry to settle", func() bool { return groupIdle(t, w, "lost-ack") })
	cs, err := m.UserClaims(ctx, "lost-ack", "u1")
	if err != nil || len(cs) != 1 || cs[0].Status != claim.StatusIssued {
		t.Fatalf("u1's claim: %+v %v", cs, err)
	}
	if dls, _ := m.DeadLetters(ctx, "lost-ack", "", 10); len(dls) != 0 {
		t.Fatalf("an issued claim was dead-lettered: %+v", dls)
	}
	if n, err := m.Void(ctx, "lost-ack", []string{res.ClaimID}); err != nil || n != 0 {
		t.Fatalf("void of an issued claim: %d %v", n, err)
	}
	if _, err := m.Claim(ctx, "lost-ack", "u2", ""); !errors.Is(err, claim.ErrSoldOut) {
		t.Fatalf("stock 1 sold twice: %v", err)
	}
}

// TestUnfinishedTransitionsAreApplied: a replay or void decided in the
// database whose Redis step never ran (the process died in between) is
// finished by the re-check loop: the replayed claims are issued, the voided
// unit returns to stock.
func TestUnfinishedTransitionsAreApplied(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			drop := poison(t, w, db)
			m := w.manager(t, "a", func(sc *stream.Config) { sc.MaxDeliveries = 1 })
			ctx := context.Background()
			create(t, m, promotion.Promotion{ID: "half", Stock: 4})
			for i := 0; i < 4; i++ {
				if _, err := m.Claim(ctx, "half", fmt.Sprintf("poison%d", i), ""); err != nil {
					t.Fatal(err)
				}
			}
			waitCounts(t, m, "half", 0, 4)
			drop()
			dls, err := m.DeadLetters(ctx, "half", "", 10)
			if err != nil || len(dls) != 4 {
				t.Fatalf("dead letters %+v %v", dls, err)
			}
			// As if the process died right after each database step.
			if _, err := w.st.TransitionDeadLetters(ctx, "half", []string{dls[0].ClaimID, dls[1].ClaimID, dls[2].ClaimID}, store.DeadReplayed); err != nil {
				t.Fatal(err)
			}
			if _, err := w.st.TransitionDeadLetters(ctx, "half", []string{dls[3].ClaimID}, store.DeadVoided); err != nil {
				t.Fatal(err)
			}
			v := waitCounts(t, m, "half", 3, 0)
			wait.For(t, 30*time.Second, "the voided unit back in stock", func() bool {
				v, err = m.Get(ctx, "half")
				return err == nil && *v.Counts.Remaining == 1
			})
			if _, err := m.Claim(ctx, "half", "late", ""); err != nil {
				t.Fatalf("claim of the returned unit: %v", err)
			}
			waitCounts(t, m, "half", 4, 0)
		})
	}
}

// TestReplayAllVisitsEachOnce: claims that fail again while a replay of all
// runs are not replayed a second time by the same call.
func TestReplayAllVisitsEachOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	poison(t, w, "sqlite") // never dropped: every replay fails again
	m := w.manager(t, "a", func(sc *stream.Config) { sc.MaxDeliveries = 1 })
	ctx := context.Background()
	create(t, m, promotion.Promotion{ID: "again", Stock: 30})
	for i := 0; i < 30; i++ {
		if _, err := m.Claim(ctx, "again", fmt.Sprintf("poison%02d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	waitCounts(t, m, "again", 0, 30)
	n, err := m.Replay(ctx, "again", nil)
	if err != nil || n != 30 {
		t.Fatalf("replay all: %d %v, want 30", n, err)
	}
	waitCounts(t, m, "again", 0, 30)
}

// TestReplayIntoDrainedPromotion: a drained promotion (ended, every claim
// issued or failed) that gets a replay is watched again, so its replayed
// claims are confirmed even by an instance started later.
func TestReplayIntoDrainedPromotion(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	drop := poison(t, w, "sqlite")
	m := w.manager(t, "a", func(sc *stream.Config) {
		sc.MaxDeliveries = 1
		sc.IdleTimeout = 100 * time.Millisecond
	})
	ctx := context.Background()
	create(t, m, promotion.Promotion{ID: "late", Stock: 3})
	for _, u := range []string{"good", "poison1"} {
		if _, err := m.Claim(ctx, "late", u, ""); err != nil {
			t.Fatal(err)
		}
	}
	waitCounts(t, m, "late", 1, 1)
	if _, err := m.Close(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 30*time.Second, "the drain", func() bool {
		p, err := w.st.GetPromotion(ctx, "late")
		return err == nil && p.Drained
	})
	drop()
	if n, err := m.Replay(ctx, "late", nil); err != nil || n != 1 {
		t.Fatalf("replay: %d %v", n, err)
	}
	if p, err := w.st.GetPromotion(ctx, "late"); err != nil || p.Drained {
		t.Fatalf("after a replay the promotion must be watched again: %+v %v", p.Drained, err)
	}
	// A second instance, started now, finds it and confirms the claim.
	other := w.manager(t, "b", nil)
	waitCounts(t, other, "late", 2, 0)
}
