package storetest

import (
	"errors"
	"testing"
	"time"

	issuers "github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/store"
)

// patchTests are the suite's cases for changing promotions and revoking
// issued claims.
var patchTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"UpdatePromotion", testUpdatePromotion},
	{"RevokeIssued", testRevokeIssued},
}

func testUpdatePromotion(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("upd")
	mustCreate(t, s, p)
	if _, err := s.UpdatePromotion(ctx, "missing", store.PromotionChange{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of a missing promotion: %v, want ErrNotFound", err)
	}
	// An empty change returns the promotion as it is.
	got, err := s.UpdatePromotion(ctx, p.ID, store.PromotionChange{})
	if err != nil || got.Stock != p.Stock || got.Name != p.Name || got.Held || got.RevokeReturnsStock {
		t.Fatalf("empty change: %+v, %v", got, err)
	}
	name, stock, ends, yes := "Renamed", int64(1500), p.EndsAt.Add(time.Hour), true
	got, err = s.UpdatePromotion(ctx, p.ID, store.PromotionChange{Name: &name, Stock: &stock, EndsAt: &ends, Held: &yes, RevokeReturnsStock: &yes})
	if err != nil {
		t.Fatal(err)
	}
	read, err := s.GetPromotion(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []store.Promotion{got, read} {
		if q.Name != name || q.Stock != stock || !q.EndsAt.Equal(ends) || !q.Held || !q.RevokeReturnsStock ||
			q.PerUserLimit != p.PerUserLimit || !q.StartsAt.Equal(p.StartsAt) {
			t.Fatalf("after the change: %+v", q)
		}
	}
	no := false
	if got, err = s.UpdatePromotion(ctx, p.ID, store.PromotionChange{Held: &no}); err != nil || got.Held || got.Stock != stock {
		t.Fatalf("resume: %+v, %v", got, err)
	}
}

func testRevokeIssued(t *testing.T, s store.Store) {
	ctx := t.Context()
	kinds, err := issuers.Builtin(issuers.Config{})
	if err != nil {
		t.Fatal(err)
	}
	coupon, points := promo("rv-c"), promo("rv-p")
	points.Kind, points.Value = store.KindPoint, 70
	mustCreate(t, s, coupon, points)
	for _, p := range []store.Promotion{coupon, points} {
		if _, err := s.IssueBatch(ctx, granted(t, kinds[p.Kind], p, 1, 3, userPerRank)); err != nil {
			t.Fatal(err)
		}
	}
	at := now()
	// Unknown ids, another promotion's claim and ids never issued are skipped.
	got, err := s.RevokeIssued(ctx, coupon.ID, []string{"rv-c#1", "rv-c#9", "rv-p#1", "nope"}, true, at)
	if err != nil || len(got) != 1 || got[0].ClaimID != "rv-c#1" || !got[0].RevokedAt.Equal(at) || !got[0].RevokeReturned || got[0].Grant.Code == "" {
		t.Fatalf("revoke: %+v, %v", got, err)
	}
	if again, err := s.RevokeIssued(ctx, coupon.ID, []string{"rv-c#1"}, true, at.Add(time.Second)); err != nil || len(again) != 0 {
		t.Fatalf("second revoke: %+v, %v", again, err)
	}
	list, err := s.ListIssued(ctx, coupon.ID, "u1")
	if err != nil || len(list) != 1 || !list[0].RevokedAt.Equal(at) {
		t.Fatalf("ListIssued after revoke: %+v, %v", list, err)
	}
	c, err := s.Counts(ctx, coupon.ID)
	if err != nil || c.Issued != 3 || c.Revoked != 1 || c.RevokedReturned != 1 {
		t.Fatalf("counts: %+v, %v", c, err)
	}

	// Points: debited once, however often the revoke is applied.
	for range 3 {
		if _, err := s.RevokeIssued(ctx, points.ID, []string{"rv-p#2"}, false, at); err != nil {
			t.Fatal(err)
		}
	}
	b, err := s.Balance(ctx, "u2")
	if err != nil || b.Points != 0 || b.Entries != 2 {
		t.Fatalf("balance of u2 after the revoke: %+v, %v (want 0 points over 2 entries)", b, err)
	}
	if b, err := s.Balance(ctx, "u3"); err != nil || b.Points != 70 {
		t.Fatalf("balance of u3: %+v, %v", b, err)
	}

	// Not applied until marked, found by the sweep's listing meanwhile.
	un, err := s.ListUnappliedRevokes(ctx, at.Add(time.Minute), 10)
	if err != nil || len(un) != 2 {
		t.Fatalf("unapplied: %+v, %v", un, err)
	}
	if un, err := s.ListUnappliedRevokes(ctx, at, 10); err != nil || len(un) != 0 {
		t.Fatalf("unapplied before the revokes: %+v, %v", un, err)
	}
	if err := s.MarkRevokesApplied(ctx, []string{"rv-c#1", "rv-p#2", "unknown"}); err != nil {
		t.Fatal(err)
	}
	if un, err := s.ListUnappliedRevokes(ctx, at.Add(time.Minute), 10); err != nil || len(un) != 0 {
		t.Fatalf("unapplied after the mark: %+v, %v", un, err)
	}
}
