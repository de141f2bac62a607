package storetest

import (
	"maps"
	"testing"
	"time"

	"github.com/dibsio/dibs/store"
)

// testUnhandledDeadLetters: the failed dead letters of each promotion are
// counted, replayed and voided ones are not, nor those of a retired
// promotion; a promotion with none is absent.
func testUnhandledDeadLetters(t *testing.T, s store.Store) {
	ctx := t.Context()
	count := func(want map[string]int64) {
		t.Helper()
		got, err := s.UnhandledDeadLetters(ctx)
		if err != nil {
			t.Fatalf("UnhandledDeadLetters: %v", err)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("UnhandledDeadLetters = %v, want %v", got, want)
		}
	}
	count(map[string]int64{})

	mustCreate(t, s, promo("uh-a"), promo("uh-b"), promo("uh-gone"))
	at := now()
	for _, d := range []store.DeadLetter{
		deadLetter("uh-a", "uh-a#1", 1, at), deadLetter("uh-a", "uh-a#2", 2, at), deadLetter("uh-a", "uh-a#3", 3, at),
		deadLetter("uh-b", "uh-b#1", 1, at),
		deadLetter("uh-gone", "uh-gone#1", 1, at),
		deadLetter("uh-none", "uh-none#1", 1, at), // no promotion row: still counted
	} {
		if err := s.RecordDeadLetter(ctx, d); err != nil {
			t.Fatalf("RecordDeadLetter(%s): %v", d.ClaimID, err)
		}
	}
	count(map[string]int64{"uh-a": 3, "uh-b": 1, "uh-gone": 1, "uh-none": 1})

	if _, err := s.TransitionDeadLetters(ctx, "uh-a", []string{"uh-a#1"}, store.DeadReplayed); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionDeadLetters(ctx, "uh-b", nil, store.DeadVoided); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDrained(ctx, "uh-gone", at.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RetirePromotion(ctx, "uh-gone", at); err != nil {
		t.Fatal(err)
	}
	count(map[string]int64{"uh-a": 2, "uh-none": 1})
}
