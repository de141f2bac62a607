package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	{"UpdatePromotionEvents", testUpdatePromotionEvents},
	{"UpdatePromotionPage", testUpdatePromotionPage},
	{"RevokeEvents", testRevokeEvents},
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
	if err != nil || got.Stock != p.Stock || got.Name != p.Name || got.Paused || got.RevokeReturnsStock {
		t.Fatalf("empty change: %+v, %v", got, err)
	}
	name, stock, ends, yes := "Renamed", int64(1500), p.EndsAt.Add(time.Hour), true
	got, err = s.UpdatePromotion(ctx, p.ID, store.PromotionChange{Name: &name, Stock: &stock, EndsAt: &ends, Paused: &yes, RevokeReturnsStock: &yes})
	if err != nil {
		t.Fatal(err)
	}
	read, err := s.GetPromotion(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []store.Promotion{got, read} {
		if q.Name != name || q.Stock != stock || !q.EndsAt.Equal(ends) || !q.Paused || !q.RevokeReturnsStock ||
			q.PerUserLimit != p.PerUserLimit || !q.StartsAt.Equal(p.StartsAt) {
			t.Fatalf("after the change: %+v", q)
		}
	}
	no := false
	if got, err = s.UpdatePromotion(ctx, p.ID, store.PromotionChange{Paused: &no}); err != nil || got.Paused || got.Stock != stock {
		t.Fatalf("resume: %+v, %v", got, err)
	}
	// The waiting room's levers, each on its own.
	rate, most, msg, pow := 500, 40, "Hold on — 10 left", 20
	got, err = s.UpdatePromotion(ctx, p.ID, store.PromotionChange{WaitingRoom: &store.WaitingRoomChange{
		AdmitPerSecond: &rate, MaxActive: &most, Message: &msg, PowDifficulty: &pow}})
	if w := got.WaitingRoom; err != nil || w.AdmitPerSecond != rate || w.MaxActive != most || w.Message != msg || w.PowDifficulty != pow {
		t.Fatalf("levers: %+v, %v", got.WaitingRoom, err)
	}
	empty := ""
	got, err = s.UpdatePromotion(ctx, p.ID, store.PromotionChange{WaitingRoom: &store.WaitingRoomChange{Message: &empty}})
	if w := got.WaitingRoom; err != nil || w.Message != "" || w.MaxActive != most || w.AdmitPerSecond != rate {
		t.Fatalf("message cleared: %+v, %v", got.WaitingRoom, err)
	}
}

// testUpdatePromotionEvents: each change of a promotion writes one
// promotion.changed event with the old and new values of what changed; a
// failing update, an empty change or a retried one writes none.
func testUpdatePromotionEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("updev")
	mustCreate(t, s, p)
	changed := func() []store.Event { return allEvents(t, s, store.EventPromotionChanged) }
	checkUpdatesWithoutEvents(t, s, p)
	at := now()
	c := checkChangeEvent(t, s, p, at)

	// The same change again (a retry) changes nothing and writes nothing.
	c.At = at.Add(time.Second)
	if _, err := s.UpdatePromotion(ctx, p.ID, c); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "the change retried", changed(), "promotion.changed updev")

	// Back and forth: each change is an event of its own.
	no, yes := false, true
	for i, v := range []*bool{&no, &yes} {
		if _, err := s.UpdatePromotion(ctx, p.ID, store.PromotionChange{Paused: v, At: at.Add(time.Duration(i+2) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	evs := changed()
	wantEvents(t, "pause, resume, pause", evs, "promotion.changed updev", "promotion.changed updev", "promotion.changed updev")
	if evs[1].ID == evs[2].ID || evs[0].ID == evs[2].ID {
		t.Errorf("distinct changes share an event id: %s %s %s", evs[0].ID, evs[1].ID, evs[2].ID)
	}

	// A waiting room's lever is named waiting_room.<field>.
	pow := 18
	if _, err := s.UpdatePromotion(ctx, p.ID, store.PromotionChange{At: at.Add(10 * time.Second),
		WaitingRoom: &store.WaitingRoomChange{PowDifficulty: &pow}}); err != nil {
		t.Fatal(err)
	}
	evs = changed()
	d := changedData(t, evs[len(evs)-1])
	if got := d.Changes["waiting_room.pow_difficulty"]; len(evs) != 4 || len(d.Changes) != 1 || got.Old != 0.0 || got.New != 18.0 {
		t.Errorf("lever change: %d events, the last %s", len(evs), evs[len(evs)-1].Data)
	}
}

// checkUpdatesWithoutEvents: failing updates write no event (a missing
// promotion, a cancelled call), nor does an empty change.
func checkUpdatesWithoutEvents(t *testing.T, s store.Store, p store.Promotion) {
	t.Helper()
	ctx := t.Context()
	name := "Renamed"
	if _, err := s.UpdatePromotion(ctx, "missing", store.PromotionChange{Name: &name}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of a missing promotion: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.UpdatePromotion(cctx, p.ID, store.PromotionChange{Name: &name}); err == nil {
		t.Fatal("a cancelled update succeeded")
	}
	if got, err := s.GetPromotion(ctx, p.ID); err != nil || got.Name != p.Name {
		t.Fatalf("after the cancelled update: %+v, %v", got, err)
	}
	if _, err := s.UpdatePromotion(ctx, p.ID, store.PromotionChange{}); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, "no change", allEvents(t, s, store.EventPromotionChanged))
}

// checkChangeEvent makes a change of p at at: one event, in the
// transaction, with the old and new values of the fields that changed
// (not of the name, set to itself). It returns the change.
func checkChangeEvent(t *testing.T, s store.Store, p store.Promotion, at time.Time) store.PromotionChange {
	t.Helper()
	stock, ends, yes, keep := int64(1500), p.EndsAt.Add(time.Hour), true, p.Name
	c := store.PromotionChange{Name: &keep, Stock: &stock, EndsAt: &ends, Paused: &yes, At: at}
	if _, err := s.UpdatePromotion(t.Context(), p.ID, c); err != nil {
		t.Fatal(err)
	}
	evs := allEvents(t, s, store.EventPromotionChanged)
	wantEvents(t, "changed", evs, "promotion.changed updev")
	if e := evs[0]; !e.At.Equal(at) || e.ClaimID != "" {
		t.Errorf("event %+v: want at %s, no claim", e, at)
	}
	d := changedData(t, evs[0])
	want := map[string][2]any{
		"stock":   {1000.0, 1500.0},
		"ends_at": {p.EndsAt.Format(time.RFC3339Nano), ends.Format(time.RFC3339Nano)},
		"paused":  {false, true},
	}
	if d.PromotionID != p.ID || len(d.Changes) != len(want) {
		t.Fatalf("data %s: want the changes of %v only (the name was set to itself)", evs[0].Data, want)
	}
	for k, w := range want {
		if got := d.Changes[k]; got.Old != w[0] || got.New != w[1] {
			t.Errorf("change of %s: %v → %v, want %v → %v", k, got.Old, got.New, w[0], w[1])
		}
	}
	return c
}

// promotionChange is the data of a promotion.changed event.
type promotionChange struct {
	PromotionID string                            `json:"promotion_id"`
	Changes     map[string]struct{ Old, New any } `json:"changes"`
}

func changedData(t *testing.T, e store.Event) promotionChange {
	t.Helper()
	var d promotionChange
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func testRevokeEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("rvev")
	p.Kind, p.Value = store.KindPoint, 30
	mustCreate(t, s, p)
	kinds, err := issuers.Builtin(issuers.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.IssueBatch(ctx, granted(t, kinds[p.Kind], p, 1, 3, userPerRank)); err != nil {
		t.Fatal(err)
	}
	revoked := func() []store.Event { return allEvents(t, s, store.EventClaimRevoked) }
	at := now()
	if _, err := s.RevokeIssued(ctx, p.ID, []string{"rvev#2", "rvev#1", "nope"}, true, at); err != nil {
		t.Fatal(err)
	}
	evs := revoked()
	wantEvents(t, "revoked", evs, "claim.revoked rvev#1", "claim.revoked rvev#2")
	for i, e := range evs {
		d := dataOf(t, e)
		if e.ID != store.EventID(store.EventClaimRevoked, e.ClaimID) || !e.At.Equal(at) || e.PromotionID != p.ID {
			t.Errorf("event %+v: id, time or promotion not as revoked", e)
		}
		if d["user_id"] != fmt.Sprintf("u%d", i+1) || d["rank"] != float64(i+1) || d["returned_to_stock"] != true ||
			d["points"] != 30.0 || d["revoked_at"] != at.Format(time.RFC3339Nano) {
			t.Errorf("claim.revoked data %s", e.Data)
		}
	}
	// A revoke repeated, alone or with a new claim, writes only the new one's.
	for range 2 {
		if _, err := s.RevokeIssued(ctx, p.ID, []string{"rvev#1", "rvev#2"}, true, at.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RevokeIssued(ctx, p.ID, []string{"rvev#1", "rvev#3"}, false, at); err != nil {
		t.Fatal(err)
	}
	evs = revoked()
	wantEvents(t, "revoked again", evs, "claim.revoked rvev#1", "claim.revoked rvev#2", "claim.revoked rvev#3")
	if d := dataOf(t, evs[2]); d["returned_to_stock"] != false {
		t.Errorf("claim.revoked data %s: want returned_to_stock false", evs[2].Data)
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

// testUpdatePromotionPage: the queue page's setting is replaced as a whole,
// kept with the other levers, reset to none, and each change is a
// promotion.changed event naming waiting_room.page with the old and new
// setting (null for none).
func testUpdatePromotionPage(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := promo("updpage")
	p.WaitingRoom = store.WaitingRoom{Enabled: true, AdmitPerSecond: 100, EntryTTLSeconds: 300, AbandonAfterSeconds: 60,
		Page: &store.RoomPage{Title: "Before", Texts: map[string]string{"heading": "Old"}, Mode: "claim"}}
	mustCreate(t, s, p)
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	page := &store.RoomPage{Title: "After ☂", Colors: store.RoomPageColors{Accent: "#0a7f5a"},
		ReturnURL: "https://shop.example/back", Mode: "return"}
	msg := "Ten left"
	got, err := s.UpdatePromotion(ctx, p.ID, store.PromotionChange{At: at,
		WaitingRoom: &store.WaitingRoomChange{Message: &msg, Page: &store.RoomPageChange{To: page}}})
	if err != nil {
		t.Fatal(err)
	}
	read, err := s.GetPromotion(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []store.Promotion{got, read} {
		if w := q.WaitingRoom; w.Page == nil || fmt.Sprint(*w.Page) != fmt.Sprint(*page) || w.Message != msg || w.AdmitPerSecond != 100 {
			t.Fatalf("after replacing the page: %+v (page %+v)", w, w.Page)
		}
	}
	// Another lever keeps the page.
	rate := 200
	if got, err = s.UpdatePromotion(ctx, p.ID, store.PromotionChange{At: at.Add(time.Second),
		WaitingRoom: &store.WaitingRoomChange{AdmitPerSecond: &rate}}); err != nil || got.WaitingRoom.Page == nil ||
		got.WaitingRoom.Page.Title != page.Title {
		t.Fatalf("another lever: %+v, %v", got.WaitingRoom, err)
	}
	// Reset: no setting, the page's defaults.
	if got, err = s.UpdatePromotion(ctx, p.ID, store.PromotionChange{At: at.Add(2 * time.Second),
		WaitingRoom: &store.WaitingRoomChange{Page: &store.RoomPageChange{}}}); err != nil || got.WaitingRoom.Page != nil {
		t.Fatalf("reset: %+v, %v", got.WaitingRoom, err)
	}
	if read, err = s.GetPromotion(ctx, p.ID); err != nil || read.WaitingRoom.Page != nil {
		t.Fatalf("reset, read back: %+v, %v", read.WaitingRoom, err)
	}
	// The same reset again changes nothing.
	if _, err := s.UpdatePromotion(ctx, p.ID, store.PromotionChange{At: at.Add(3 * time.Second),
		WaitingRoom: &store.WaitingRoomChange{Page: &store.RoomPageChange{}}}); err != nil {
		t.Fatal(err)
	}

	evs := allEvents(t, s, store.EventPromotionChanged)
	type pageChange struct{ Old, New *store.RoomPage }
	var pages []pageChange
	for _, e := range evs {
		var d struct {
			Changes map[string]json.RawMessage `json:"changes"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if raw, ok := d.Changes["waiting_room.page"]; ok {
			var c pageChange
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			pages = append(pages, c)
		}
	}
	show := func(pcs []pageChange) string {
		out := ""
		for _, c := range pcs {
			b, _ := json.Marshal(c)
			out += string(b) + "\n"
		}
		return out
	}
	want := []pageChange{{p.WaitingRoom.Page, page}, {page, nil}}
	if len(evs) != 3 || show(pages) != show(want) {
		t.Fatalf("%d promotion.changed events, their page changes:\n%swant 3 events, the page changes\n%s", len(evs), show(pages), show(want))
	}
}
