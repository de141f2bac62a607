package keyspace_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/waitroom"
)

// must fails the test on err, naming step.
func must(t *testing.T, step string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
}

// TestClaimScriptsStayInTheirHashTag runs every claim script (claim,
// claim_room, claim_seg, grant, ack, fail, replay, void, requeue, rerank,
// collision, patch, revoke, pause, restore, resume, release, halt, end,
// close, seg_take, seg_give…) as an ACL user allowed only the keys under
// the hash tag of the script's first key: a script that touched a key of
// another promotion, another segment or no promotion fails with NOPERM.
func TestClaimScriptsStayInTheirHashTag(t *testing.T) {
	t.Parallel()
	for _, layout := range []claim.Layout{claim.LayoutCompact, claim.LayoutClassic} {
		t.Run(layout.String(), func(t *testing.T) {
			t.Parallel()
			exerciseClaim(t, layout)
		})
	}
}

func exerciseClaim(t *testing.T, layout claim.Layout) {
	ctx := context.Background()
	c := newTagged(t, "p")
	g, err := claim.New(c, claim.Config{Prefix: c.prefix, Layout: layout})
	must(t, "new gate", err)
	now := time.Now()
	p := claim.Promotion{ID: "p", Stock: 5, PerUserLimit: 2, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)}
	_, err = g.Open(ctx, p)
	must(t, "open", err)
	r1, err := g.Claim(ctx, "p", "u1", "k1")
	must(t, "claim", err)
	r2, err := g.ClaimFenced(ctx, "p", "u2", "", r1.Rank)
	must(t, "claim fenced", err)
	_, err = g.Claim(ctx, "p", "u1", "k1")
	must(t, "claim replayed", err)
	_, err = g.ClaimBatch(ctx, "p", []claim.Ask{{UserID: "u3"}, {UserID: "u4", IdemKey: "k4"}, {UserID: "u1", IdemKey: "k1"}})
	must(t, "claim batch", err)
	_, err = g.State(ctx, "p")
	must(t, "state", err)
	_, err = g.UserClaims(ctx, "p", "u1")
	must(t, "user claims", err)

	entries, err := c.Do(ctx, c.B().Xrange().Key(g.Keys("p").Stream()).Start("-").End("+").Build()).AsXRange()
	must(t, "read stream", err)
	var acks []claim.Entry
	for _, e := range entries {
		acks = append(acks, claim.Entry{ID: e.ID, Rank: e.FieldValues["rank"]})
	}
	_, err = g.Ack(ctx, "p", acks[:1])
	must(t, "ack", err)
	must(t, "mark failed", g.MarkFailed(ctx, "p", r2.Rank))
	_, err = g.Replay(ctx, "p", r2.Rank, map[string]string{"rank": "2", "user": "u2"})
	must(t, "replay", err)
	_ = g.Requeue(ctx, "p", []claim.Unconfirmed{{Rank: r2.Rank, UserID: "u2", Slot: r2.Slot, AcceptedAt: r2.AcceptedAt}})
	_, _, err = g.Rerank(ctx, "p", r2.Rank, "u2", r2.Slot, r2.AcceptedAt, r2.Rank)
	must(t, "rerank", err)
	_, _, err = g.Void(ctx, "p", r2.Rank)
	must(t, "void", err)
	_, _, err = g.Revoke(ctx, "p", true, r1.Rank)
	must(t, "revoke", err)

	stock := int64(6)
	paused := true
	pt, _, err := g.BeginPatch(ctx, "p", claim.Change{Stock: &stock, Paused: &paused}, time.Minute)
	must(t, "begin patch", err)
	_, err = pt.Apply(ctx)
	must(t, "apply patch", err)

	// The collision script marks the promotion rebuilding; a take-over (the
	// pause script) then holds its rebuild.
	_ = g.Collided(ctx, "p", r2.AcceptedAt)
	rb, err := g.TakeOver(ctx, p, "owner", time.Minute)
	must(t, "take over", err)
	_, err = rb.Restore(ctx, []claim.Known{{Rank: r1.Rank, UserID: "u1", Slot: r1.Slot, Status: claim.StatusIssued, IssuedAt: now}})
	must(t, "restore", err)
	_, err = rb.Resume(ctx, 0)
	must(t, "resume", err)
	must(t, "release", rb.Release(ctx))
	_, err = g.Halt(ctx, "p", "test")
	must(t, "halt", err)
	_, _, err = g.Ended(ctx, "p")
	must(t, "ended", err)
	must(t, "close", g.Close(ctx, "p"))

	grant := claim.Promotion{ID: "p", Grant: true, Stock: 3, PerUserLimit: 1, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)}
	c2 := newTagged(t, "p")
	g2, err := claim.New(c2, claim.Config{Prefix: c2.prefix, Layout: layout})
	must(t, "new gate", err)
	_, err = g2.Open(ctx, grant)
	must(t, "open grant", err)
	_, err = g2.Grant(ctx, "p", []string{"a", "b"})
	must(t, "grant", err)
	_, err = g2.Marks(ctx, []string{"p"})
	must(t, "marks", err)
}

// TestSegmentScriptsStayInTheirHashTag runs the scripts of a segmented
// promotion (claim_seg, seg_take, seg_give) as an ACL user of the one
// segment the script's first key is in: a script that touched another
// segment's key fails.
func TestSegmentScriptsStayInTheirHashTag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newTagged(t, "s")
	g, err := claim.New(c, claim.Config{Prefix: c.prefix})
	must(t, "new gate", err)
	now := time.Now()
	p := claim.Promotion{ID: "s", Stock: 4, PerUserLimit: 4, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)}
	s := claim.SegmentsOf("s", 2)
	_, err = g.OpenSegments(ctx, p, s, 0)
	must(t, "open segments", err)
	for _, u := range []string{"a", "b", "c", "d", "e", "f"} {
		if _, err := g.ClaimSegmented(ctx, s, u, ""); err != nil && !errors.Is(err, claim.ErrSoldOut) && !errors.Is(err, claim.ErrAlreadyClaimed) {
			t.Fatalf("claim segmented: %v", err)
		}
	}
	_, err = g.Transfer(ctx, s, 0, 1)
	if err != nil && !errors.Is(err, claim.ErrSoldOut) {
		t.Logf("transfer: %v", err)
	}
	must(t, "settle", g.SettleTransfers(ctx, s))
	_, err = g.SegmentStates(ctx, s)
	must(t, "segment states", err)
	must(t, "close segments", g.CloseSegments(ctx, s))
	_, _, err = g.EndedSegments(ctx, s)
	must(t, "ended segments", err)
	if len(c.tags) != 2 {
		t.Errorf("scripts ran under tags %v, want both segments'", c.tags)
	}
}

// TestRoomScriptsStayInTheirHashTag runs the waiting room's scripts (open,
// join, status with check-in, tick, snapshot, levers, spend, assign) and
// the claim script of a roomed promotion (claim_room) as an ACL user of
// the promotion's hash tag.
func TestRoomScriptsStayInTheirHashTag(t *testing.T) {
	t.Parallel()
	for _, layout := range []waitroom.Layout{waitroom.LayoutCompact, waitroom.LayoutClassic} {
		t.Run(layout.String(), func(t *testing.T) {
			t.Parallel()
			exerciseRoom(t, layout)
		})
	}
}

func exerciseRoom(t *testing.T, layout waitroom.Layout) {
	ctx := context.Background()
	c := newTagged(t, "r")
	g, err := claim.New(c, claim.Config{Prefix: c.prefix})
	must(t, "new gate", err)
	now := time.Now()
	_, err = g.Open(ctx, claim.Promotion{ID: "r", Stock: 5, PerUserLimit: 1, StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)})
	must(t, "open", err)
	keys := []waitroom.Key{{ID: "k1", Secret: bytes.Repeat([]byte{7}, waitroom.MinSecretLen)}}
	rooms, err := waitroom.New(c, waitroom.Config{Prefix: c.prefix, Keys: keys, Layout: layout})
	must(t, "new rooms", err)
	_, err = rooms.Open(ctx, "r", waitroom.Settings{AdmitPerSecond: 100, OpensAt: now.Add(-time.Second)})
	must(t, "open room", err)
	for _, u := range []string{"u1", "u2", "u3"} {
		_, err := rooms.Join(ctx, "r", u)
		must(t, "join", err)
	}
	_, err = rooms.Tick(ctx, "r")
	must(t, "tick", err)
	_, err = rooms.Tick(ctx, "r")
	must(t, "tick", err)
	st, err := rooms.Status(ctx, "r", "u1", true)
	must(t, "status", err)
	_, err = rooms.Status(ctx, "r", "u3", false)
	must(t, "status", err)
	_, err = rooms.Counts(ctx, "r")
	must(t, "counts", err)
	_, _ = rooms.Prequeue(ctx, "r", 0, 10)
	rate := int64(50)
	must(t, "levers", rooms.Apply(ctx, "r", waitroom.Levers{AdmitPerSecond: &rate}))
	if st.Status != waitroom.StatusAdmitted {
		t.Fatalf("u1 is %v, want admitted", st.Status)
	}
	pass, err := rooms.Verify("r", "u1", st.Token)
	must(t, "verify", err)
	_, err = g.ClaimRoomed(ctx, "r", "u1", "", 0, rooms.Keys("r").SpendKeys(), pass.ID)
	must(t, "claim roomed", err)
	st2, err := rooms.Status(ctx, "r", "u2", true)
	must(t, "status", err)
	if st2.Status == waitroom.StatusAdmitted {
		_, err = rooms.Spend(ctx, "r", "u2", st2.Token)
		must(t, "spend", err)
	}
}
