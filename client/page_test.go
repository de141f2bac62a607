package client_test

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/dibsio/dibs/client"
)

// TestQueuePageSetting: the queue page's setting round-trips: given at
// creation, shown back, replaced as a whole by a PATCH and reset to the
// defaults with a nil PageChange.To; a bad member is refused naming it.
func TestQueuePageSetting(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	ctx := t.Context()
	pid := id(t, "pg")
	page := &client.QueuePage{Title: "Spring drop", Colors: client.QueuePageColors{Accent: "#0a7f5a"},
		Texts: map[string]string{"sold_out": "Gone"}, ReturnURL: "https://shop.example/back", Mode: "return"}
	p, err := c.CreatePromotion(ctx, client.NewPromotion{ID: pid, Stock: 5,
		WaitingRoom: &client.WaitingRoomSettings{Enabled: true, Page: page}})
	if err != nil || !reflect.DeepEqual(p.WaitingRoom.Page, page) {
		t.Fatalf("created with page %+v, %v; want %+v", p.WaitingRoom.Page, err, page)
	}
	if got, err := c.GetPromotion(ctx, pid); err != nil || !reflect.DeepEqual(got.WaitingRoom.Page, page) {
		t.Fatalf("read back: %+v, %v", got.WaitingRoom.Page, err)
	}
	next := &client.QueuePage{Title: "Last call"}
	p, err = c.PatchPromotion(ctx, pid, client.PromotionPatch{WaitingRoom: &client.WaitingRoomPatch{Page: &client.PageChange{To: next}}})
	if want := (&client.QueuePage{Title: "Last call", Mode: "claim"}); err != nil || !reflect.DeepEqual(p.WaitingRoom.Page, want) {
		t.Fatalf("replaced: %+v, %v; want %+v", p.WaitingRoom.Page, err, want)
	}
	msg := "Soon"
	if p, err = c.PatchPromotion(ctx, pid, client.PromotionPatch{WaitingRoom: &client.WaitingRoomPatch{Message: &msg}}); err != nil ||
		p.WaitingRoom.Page == nil || p.WaitingRoom.Page.Title != "Last call" {
		t.Fatalf("another lever changed the page: %+v, %v", p.WaitingRoom.Page, err)
	}
	_, err = c.PatchPromotion(ctx, pid, client.PromotionPatch{WaitingRoom: &client.WaitingRoomPatch{
		Page: &client.PageChange{To: &client.QueuePage{LogoURL: "http://shop.example/logo.png"}}}})
	if pr := wantProblem(t, err, client.CodeInvalidRequest, http.StatusBadRequest); pr.Field != "waiting_room.page.logo_url" {
		t.Fatalf("a logo over http: %+v", pr)
	}
	if p, err = c.PatchPromotion(ctx, pid, client.PromotionPatch{WaitingRoom: &client.WaitingRoomPatch{Page: &client.PageChange{}}}); err != nil ||
		p.WaitingRoom.Page != nil {
		t.Fatalf("reset: %+v, %v", p.WaitingRoom.Page, err)
	}
}
