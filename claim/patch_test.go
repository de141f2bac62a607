package claim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
)

// TestPatch changes a running promotion: a lower stock below what is
// accepted is refused with nothing changed, one above works, a raise
// reopens a sold-out promotion, Paused pauses and resumes claims, a later
// end reopens a promotion its end closed but not one an admin closed.
func TestPatch(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, promo("p", 3, 1))
		for _, u := range []string{"a", "b", "c"} {
			if _, err := f.gate.Claim(ctx, "p", u, ""); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.gate.Claim(ctx, "p", "d", ""); !errors.Is(err, claim.ErrSoldOut) {
			t.Fatalf("claim past the stock: %v", err)
		}
		two, five := int64(2), int64(5)
		if _, acc, err := f.gate.BeginPatch(ctx, "p", claim.Change{Stock: &two}, 0); !errors.Is(err, claim.ErrBelowAccepted) || acc != 3 {
			t.Fatalf("lower below accepted: %d, %v", acc, err)
		}
		// Refused with nothing taken: no lease either, so a repair runs.
		if _, err := f.gate.Repair(ctx, "p", changes(t, f, "p"), claim.Change{}); err != nil {
			t.Fatalf("repair after a refused change: %v", err)
		}
		if st, _ := f.gate.State(ctx, "p"); st.Stock != 3 {
			t.Fatalf("stock after a refused lower: %d", st.Stock)
		}
		pt, _, err := f.gate.BeginPatch(ctx, "p", claim.Change{Stock: &five}, 0)
		if err != nil {
			t.Fatal(err)
		}
		// A second change waits for the first; so does a repair.
		if _, _, err := f.gate.BeginPatch(ctx, "p", claim.Change{Stock: &five}, 0); !errors.Is(err, claim.ErrPatchBusy) {
			t.Fatalf("second change: %v", err)
		}
		if _, err := f.gate.Repair(ctx, "p", changes(t, f, "p"), claim.Change{Stock: &two}); !errors.Is(err, claim.ErrPatchBusy) {
			t.Fatalf("repair during a change: %v", err)
		}
		stale := changes(t, f, "p")
		// A raise is applied only by Apply (the database first).
		if _, err := f.gate.Claim(ctx, "p", "d", ""); !errors.Is(err, claim.ErrSoldOut) {
			t.Fatalf("claim before Apply: %v", err)
		}
		if _, err := pt.Apply(ctx); err != nil {
			t.Fatal(err)
		}
		if r, err := f.gate.Claim(ctx, "p", "d", ""); err != nil || r.Rank != 4 || r.Remaining != 1 {
			t.Fatalf("claim after the raise: %+v, %v", r, err)
		}
		// A repair with values read before that change does nothing.
		if _, err := f.gate.Repair(ctx, "p", stale, claim.Change{Stock: &two}); !errors.Is(err, claim.ErrPatchBusy) {
			t.Fatalf("stale repair: %v", err)
		}

		yes, no := true, false
		pt, _, err = f.gate.BeginPatch(ctx, "p", claim.Change{Paused: &yes}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pt.Apply(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := f.gate.Claim(ctx, "p", "e", ""); !errors.Is(err, claim.ErrPaused) {
			t.Fatalf("claim while paused: %v", err)
		}
		if _, err := f.gate.Repair(ctx, "p", changes(t, f, "p"), claim.Change{Paused: &no}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.gate.Claim(ctx, "p", "e", ""); err != nil {
			t.Fatalf("claim after the resume: %v", err)
		}

		// Ended by its end, reopened by a later one.
		past, later := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
		if _, err := f.gate.Repair(ctx, "p", changes(t, f, "p"), claim.Change{EndsAt: &past}); err != nil {
			t.Fatal(err)
		}
		if ended, _, err := f.gate.Ended(ctx, "p"); err != nil || !ended {
			t.Fatalf("Ended after an earlier end: %v, %v", ended, err)
		}
		if _, err := f.gate.Repair(ctx, "p", changes(t, f, "p"), claim.Change{EndsAt: &later}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.gate.Claim(ctx, "p", "f", ""); !errors.Is(err, claim.ErrEnded) {
			t.Fatalf("claim after a later end without reopen: %v", err)
		}
		if _, err := f.gate.Repair(ctx, "p", changes(t, f, "p"), claim.Change{EndsAt: &later, Reopen: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.gate.Claim(ctx, "p", "f", ""); !errors.Is(err, claim.ErrSoldOut) {
			t.Fatalf("claim after the reopen: %v, want sold out (5 of 5 taken)", err)
		}
		// Closed by an admin: a later end does not reopen it.
		if err := f.gate.Close(ctx, "p"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.gate.Repair(ctx, "p", changes(t, f, "p"), claim.Change{EndsAt: &later, Reopen: true, Stock: &[]int64{9}[0]}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.gate.Claim(ctx, "p", "g", ""); !errors.Is(err, claim.ErrEnded) {
			t.Fatalf("claim on a closed promotion after a later end: %v", err)
		}
	})
}

// changes reads the promotion's change count, as Repair takes it.
func changes(t *testing.T, f fixture, id string) int64 {
	t.Helper()
	ms, err := f.gate.Marks(context.Background(), []string{id})
	if err != nil {
		t.Fatal(err)
	}
	return ms[0].Changes
}

// TestRevoke revokes issued claims: with the unit returned it is claimable
// again, exactly once however often the revoke is applied; without, not.
func TestRevoke(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, promo("r", 2, 1))
		for _, u := range []string{"a", "b"} {
			if _, err := f.gate.Claim(ctx, "r", u, ""); err != nil {
				t.Fatal(err)
			}
		}
		if n, unknown, err := f.gate.Revoke(ctx, "r", false, 1, 9); err != nil || n != 1 || len(unknown) != 1 || unknown[0] != 9 {
			t.Fatalf("revoke without return: %d %v %v", n, unknown, err)
		}
		if _, err := f.gate.Claim(ctx, "r", "c", ""); !errors.Is(err, claim.ErrSoldOut) {
			t.Fatalf("claim after a revoke without return: %v", err)
		}
		for range 3 {
			if _, _, err := f.gate.Revoke(ctx, "r", true, 2); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.gate.Claim(ctx, "r", "c", ""); err != nil {
			t.Fatalf("claim after a revoke with return: %v", err)
		}
		if _, err := f.gate.Claim(ctx, "r", "d", ""); !errors.Is(err, claim.ErrSoldOut) {
			t.Fatalf("a second claim after one unit returned: %v", err)
		}
		cs, err := f.gate.UserClaims(ctx, "r", "b")
		if err != nil || len(cs) != 1 || cs[0].Status != claim.StatusRevoked {
			t.Fatalf("revoked claim's status: %+v, %v", cs, err)
		}
		// A late acknowledgement keeps the claim revoked.
		if _, err := f.gate.Ack(ctx, "r", []claim.Entry{{ID: "0-1", Rank: "2"}}); err != nil {
			t.Fatal(err)
		}
		if cs, _ := f.gate.UserClaims(ctx, "r", "b"); cs[0].Status != claim.StatusRevoked {
			t.Fatalf("status after a late ack: %+v", cs)
		}
	})
}
