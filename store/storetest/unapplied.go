package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/dibsio/dibs/store"
)

// Dead letters replayed or voided whose side effect in Redis (the claim
// enqueued again, its unit returned to stock) is not yet marked applied.

// testUnappliedDeadLetters: replayed and voided dead letters are listed
// until marked applied, oldest move first, and a claim that fails again or
// is recorded again keeps the list right.
func testUnappliedDeadLetters(t *testing.T, s store.Store) {
	w := recordUnapplied(t, s)
	w.moveAndList()
	w.applySome()
	w.moveAgain()
	w.applyRest()
}

// unappliedWalk is testUnappliedDeadLetters's dead letters as the store
// should hold them: d1…d4 of promotion "ua", other of "ua-other".
type unappliedWalk struct {
	t                     *testing.T
	s                     store.Store
	d1, d2, d3, d4, other store.DeadLetter
}

// recordUnapplied records the dead letters: failed, none is unapplied.
func recordUnapplied(t *testing.T, s store.Store) *unappliedWalk {
	t.Helper()
	at := now()
	w := &unappliedWalk{t: t, s: s}
	w.d1, w.d2, w.d3, w.d4 = deadLetter("ua", "ua#1", 1, at), deadLetter("ua", "ua#2", 2, at),
		deadLetter("ua", "ua#3", 3, at), deadLetter("ua", "ua#4", 4, at)
	w.other = deadLetter("ua-other", "ua-other#1", 1, at)
	for _, d := range []store.DeadLetter{w.d1, w.d2, w.d3, w.d4, w.other} {
		if err := s.RecordDeadLetter(t.Context(), d); err != nil {
			t.Fatalf("RecordDeadLetter(%s): %v", d.ClaimID, err)
		}
	}
	equalDeadLetters(t, "recorded", w.list(later(), 100), nil)
	return w
}

// later is a time after every move of the test.
func later() time.Time { return time.Now().Add(time.Hour) }

func (w *unappliedWalk) list(movedBefore time.Time, limit int) []store.DeadLetter {
	w.t.Helper()
	ds, err := w.s.ListUnappliedDeadLetters(w.t.Context(), movedBefore, limit)
	if err != nil {
		w.t.Fatalf("ListUnappliedDeadLetters: %v", err)
	}
	return ds
}

func (w *unappliedWalk) transition(promotionID string, claims []string, to string) {
	w.t.Helper()
	moved, err := w.s.TransitionDeadLetters(w.t.Context(), promotionID, claims, to)
	if err != nil || len(moved) != len(claims) {
		w.t.Fatalf("TransitionDeadLetters(%v, %s) moved %v, %v", claims, to, claimIDs(moved), err)
	}
}

// moveAndList voids ua#3, then replays ua#1 and ua#2 and voids ua-other#1,
// and lists them by the time of their move and by limit.
func (w *unappliedWalk) moveAndList() {
	t := w.t
	t.Helper()
	start := now()
	w.transition("ua", []string{"ua#3"}, store.DeadVoided)
	// Every later move is at or after mid; ua#3's was before it.
	mid := now()
	w.transition("ua", []string{"ua#1", "ua#2"}, store.DeadReplayed)
	w.transition("ua-other", []string{"ua-other#1"}, store.DeadVoided)
	w.d1.State, w.d2.State, w.d3.State, w.other.State = store.DeadReplayed, store.DeadReplayed, store.DeadVoided, store.DeadVoided

	// Oldest move first (ties by claim_id), both states, every promotion;
	// the still-failed ua#4 is not listed.
	equalDeadLetters(t, "unapplied", w.list(later(), 100), []store.DeadLetter{w.d3, w.d1, w.d2, w.other})
	equalDeadLetters(t, "limit 2", w.list(later(), 2), []store.DeadLetter{w.d3, w.d1})
	equalDeadLetters(t, "moved before mid", w.list(mid, 100), []store.DeadLetter{w.d3})
	equalDeadLetters(t, "moved before the first move", w.list(start, 100), nil)
	equalDeadLetters(t, "limit 0", w.list(later(), 0), nil)
}

// applySome marks ua#1 and ua#3 applied. Applied ones leave the list;
// unknown claims and an empty list are ignored, and so is a claim named
// with another state than its own (a late mark of an earlier transition).
func (w *unappliedWalk) applySome() {
	t, s, ctx := w.t, w.s, w.t.Context()
	t.Helper()
	if err := s.MarkDeadLettersApplied(ctx, store.DeadReplayed, []string{"ua#1", "ua#3", "ua#missing"}); err != nil {
		t.Fatalf("MarkDeadLettersApplied: %v", err)
	}
	equalDeadLetters(t, "after applying replays ua#1 and ua#3", w.list(later(), 100), []store.DeadLetter{w.d3, w.d2, w.other})
	if err := s.MarkDeadLettersApplied(ctx, store.DeadVoided, []string{"ua#3"}); err != nil {
		t.Fatalf("MarkDeadLettersApplied: %v", err)
	}
	if err := s.MarkDeadLettersApplied(ctx, store.DeadVoided, nil); err != nil {
		t.Fatalf("MarkDeadLettersApplied(nil): %v", err)
	}
	equalDeadLetters(t, "after applying ua#1 and ua#3", w.list(later(), 100), []store.DeadLetter{w.d2, w.other})
}

// moveAgain: a replayed claim that fails again has nothing pending;
// replayed once more, it is pending again, as the newest move. Recording a
// voided claim again leaves it voided, its return to stock still pending.
func (w *unappliedWalk) moveAgain() {
	t, s, ctx := w.t, w.s, w.t.Context()
	t.Helper()
	w.d2.State, w.d2.Reason = store.DeadFailed, "failed again"
	if err := s.RecordDeadLetter(ctx, w.d2); err != nil {
		t.Fatal(err)
	}
	equalDeadLetters(t, "after ua#2 failed again", w.list(later(), 100), []store.DeadLetter{w.other})
	w.transition("ua", []string{"ua#2"}, store.DeadReplayed)
	w.d2.State = store.DeadReplayed
	equalDeadLetters(t, "after ua#2 was replayed again", w.list(later(), 100), []store.DeadLetter{w.other, w.d2})

	late := w.other
	late.State, late.Reason = store.DeadFailed, "late failure"
	if err := s.RecordDeadLetter(ctx, late); err != nil {
		t.Fatal(err)
	}
	equalDeadLetters(t, "after recording a voided claim", w.list(later(), 100), []store.DeadLetter{w.other, w.d2})
}

// applyRest marks the rest applied, twice: the list is empty, and the
// failed ua#4 is still failed.
func (w *unappliedWalk) applyRest() {
	t, s, ctx := w.t, w.s, w.t.Context()
	t.Helper()
	if err := s.MarkDeadLettersApplied(ctx, store.DeadReplayed, []string{"ua#2"}); err != nil {
		t.Fatalf("MarkDeadLettersApplied: %v", err)
	}
	if err := s.MarkDeadLettersApplied(ctx, store.DeadVoided, []string{"ua-other#1"}); err != nil {
		t.Fatalf("MarkDeadLettersApplied: %v", err)
	}
	equalDeadLetters(t, "all applied", w.list(later(), 100), nil)
	// Applying twice is harmless.
	if err := s.MarkDeadLettersApplied(ctx, store.DeadReplayed, []string{"ua#2"}); err != nil {
		t.Fatalf("MarkDeadLettersApplied again: %v", err)
	}
	if failed, err := s.ListDeadLetters(ctx, "ua", "", 10); err != nil || !slices.Equal(claimIDs(failed), []string{"ua#4"}) {
		t.Fatalf("failed dead letters = %v, %v; want [ua#4]", claimIDs(failed), err)
	}
}
