package claim_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/waitroom"
)

// admitted opens promotion id with stock units and a waiting room that
// opened an hour ago, joins users and lets them in as far as the stock
// allows; it returns the rooms and each admitted user's pass id.
func (f fixture) admitted(t *testing.T, id string, stock int64, users ...string) (*waitroom.Rooms, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	f.open(t, claim.Promotion{ID: id, Stock: stock})
	rooms, err := waitroom.New(f.client, waitroom.Config{Prefix: f.prefix,
		Keys: []waitroom.Key{{ID: "k", Secret: bytes.Repeat([]byte{1}, waitroom.MinSecretLen)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rooms.Open(ctx, id, waitroom.Settings{OpensAt: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if _, err := rooms.Join(ctx, id, u); err != nil {
			t.Fatal(err)
		}
	}
	res, err := rooms.Tick(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	passes := map[string]int64{}
	for _, a := range res.New {
		passes[a.Pass.User] = a.Pass.ID
	}
	return rooms, passes
}

// TestClaimRoomed: the claim spends the pass in the step that takes the
// unit, after the replay and the window, and only when it takes the unit.
func TestClaimRoomed(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		rooms, passes := f.admitted(t, "r", 1, "u1", "u2")
		keys := rooms.Keys("r").SpendKeys()
		if len(passes) != 1 || passes["u1"] == 0 {
			t.Fatalf("admitted %v, want u1 alone (one unit)", passes)
		}
		for name, c := range map[string]struct {
			user string
			pass int64
		}{"no pass": {"u2", 0}, "another user's pass": {"u2", passes["u1"]}, "an unknown pass": {"u1", 99}} {
			if _, err := f.gate.ClaimRoomed(ctx, "r", c.user, "", 0, keys, c.pass); !errors.Is(err, claim.ErrNotAdmitted) {
				t.Fatalf("claim with %s: %v, want not admitted", name, err)
			}
		}
		// Another unit-taker empties the stock: sold out leaves the pass live.
		if _, err := f.gate.Claim(ctx, "r", "other", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := f.gate.ClaimRoomed(ctx, "r", "u1", "k", 0, keys, passes["u1"]); !errors.Is(err, claim.ErrSoldOut) {
			t.Fatalf("claim once sold out: %v", err)
		}
		if c, err := rooms.Counts(ctx, "r"); err != nil || c.PassesSpent != 0 {
			t.Fatalf("counts after sold out: %+v %v", c, err)
		}
		// A unit comes back: the pass claims once, a retry with its key gets
		// the original answer, a second claim is refused.
		if n, _, err := f.gate.Void(ctx, "r", 1); err != nil || n != 1 {
			t.Fatalf("void: %d %v", n, err)
		}
		res, err := f.gate.ClaimRoomed(ctx, "r", "u1", "k", 0, keys, passes["u1"])
		if err != nil {
			t.Fatalf("claim with the pass: %v", err)
		}
		again, err := f.gate.ClaimRoomed(ctx, "r", "u1", "k", 0, keys, passes["u1"])
		if err != nil || !again.Replayed || again.Rank != res.Rank {
			t.Fatalf("retry: %+v %v (first %+v)", again, err, res)
		}
		if _, err := f.gate.ClaimRoomed(ctx, "r", "u1", "k2", 0, keys, passes["u1"]); !errors.Is(err, claim.ErrNotAdmitted) {
			t.Fatalf("second claim with the pass: %v", err)
		}
		if c, err := rooms.Counts(ctx, "r"); err != nil || c.PassesSpent != 1 {
			t.Fatalf("counts after the claim: %+v %v", c, err)
		}
		// The window comes before the pass.
		if err := f.gate.Close(ctx, "r"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.gate.ClaimRoomed(ctx, "r", "u2", "", 0, keys, 0); !errors.Is(err, claim.ErrEnded) {
			t.Fatalf("claim once closed: %v", err)
		}
		// Without a room the pass is ignored.
		f.open(t, claim.Promotion{ID: "plain", Stock: 1})
		if _, err := f.gate.ClaimRoomed(ctx, "plain", "u1", "", 0, waitroom.KeysFor(f.prefix, "plain").SpendKeys(), 0); err != nil {
			t.Fatalf("claim without a room: %v", err)
		}
	})
}
