package promotion_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/waitroom"
)

// TestNormalizePage checks the queue page's setting: each member's rule,
// with the field a refusal names, and the default mode.
func TestNormalizePage(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	long := strings.Repeat("é", promotion.MaxPageText+1)
	cases := []struct {
		name  string
		page  promotion.RoomPage
		off   bool   // the waiting room not enabled
		field string // "" when valid
	}{
		{"empty", promotion.RoomPage{}, false, ""},
		{"everything", promotion.RoomPage{Title: "Spring <drop>", Colors: promotion.RoomPageColors{Background: "#FFF", Text: "#111111", Accent: "#0a7f5a"},
			LogoURL: "https://shop.example/logo.png", Texts: map[string]string{"heading": "Line\nhere", "sold_out": "Gone"},
			ReturnURL: "https://shop.example/checkout?x=1", Mode: "return"}, false, ""},
		{"return to localhost", promotion.RoomPage{ReturnURL: "http://localhost:8080/back", Mode: "return"}, false, ""},
		{"return to 127.0.0.1", promotion.RoomPage{ReturnURL: "http://127.0.0.1/back"}, false, ""},
		{"room off", promotion.RoomPage{Title: "x"}, true, "waiting_room.page"},
		{"title too long", promotion.RoomPage{Title: strings.Repeat("a", promotion.MaxPageTitle+1)}, false, "waiting_room.page.title"},
		{"title with a line feed", promotion.RoomPage{Title: "a\nb"}, false, "waiting_room.page.title"},
		{"colour by name", promotion.RoomPage{Colors: promotion.RoomPageColors{Accent: "red"}}, false, "waiting_room.page.colors.accent"},
		{"colour with CSS", promotion.RoomPage{Colors: promotion.RoomPageColors{Background: "#fff;x:y"}}, false, "waiting_room.page.colors.background"},
		{"colour of 4 digits", promotion.RoomPage{Colors: promotion.RoomPageColors{Text: "#ffff"}}, false, "waiting_room.page.colors.text"},
		{"logo over http", promotion.RoomPage{LogoURL: "http://shop.example/logo.png"}, false, "waiting_room.page.logo_url"},
		{"logo on localhost over http", promotion.RoomPage{LogoURL: "http://localhost/logo.png"}, false, "waiting_room.page.logo_url"},
		{"logo as data", promotion.RoomPage{LogoURL: "data:image/png;base64,AAAA"}, false, "waiting_room.page.logo_url"},
		{"logo as javascript", promotion.RoomPage{LogoURL: "javascript:alert(1)"}, false, "waiting_room.page.logo_url"},
		{"logo relative", promotion.RoomPage{LogoURL: "/logo.png"}, false, "waiting_room.page.logo_url"},
		{"unknown text", promotion.RoomPage{Texts: map[string]string{"footer": "x"}}, false, "waiting_room.page.texts.footer"},
		{"text too long", promotion.RoomPage{Texts: map[string]string{"waiting": long}}, false, "waiting_room.page.texts.waiting"},
		{"text with a control character", promotion.RoomPage{Texts: map[string]string{"waiting": "a\x07"}}, false, "waiting_room.page.texts.waiting"},
		{"text not UTF-8", promotion.RoomPage{Texts: map[string]string{"waiting": "a\xff"}}, false, "waiting_room.page.texts.waiting"},
		{"return over http", promotion.RoomPage{ReturnURL: "http://shop.example/back"}, false, "waiting_room.page.return_url"},
		{"return with a fragment", promotion.RoomPage{ReturnURL: "https://shop.example/back#x"}, false, "waiting_room.page.return_url"},
		{"return with an empty fragment", promotion.RoomPage{ReturnURL: "https://shop.example/back#"}, false, "waiting_room.page.return_url"},
		{"return with user info", promotion.RoomPage{ReturnURL: "https://a:b@shop.example/back"}, false, "waiting_room.page.return_url"},
		{"return too long", promotion.RoomPage{ReturnURL: "https://shop.example/" + strings.Repeat("a", promotion.MaxPageURLLength)}, false, "waiting_room.page.return_url"},
		{"return mode without a URL", promotion.RoomPage{Mode: "return"}, false, "waiting_room.page.return_url"},
		{"unknown mode", promotion.RoomPage{Mode: "redirect"}, false, "waiting_room.page.mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			page := tc.page
			p := promotion.Promotion{Stock: 1, WaitingRoom: promotion.WaitingRoom{Enabled: !tc.off, Page: &page}}
			err := promotion.Normalize(&p, now)
			var ve *promotion.ValidationError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Normalize: %v, want nil", err)
			case tc.field != "" && !errors.As(err, &ve):
				t.Fatalf("Normalize: %v, want a ValidationError of %s", err, tc.field)
			case tc.field != "" && ve.Field != tc.field:
				t.Fatalf("Normalize: field %s (%v), want %s", ve.Field, err, tc.field)
			}
			if tc.field == "" && tc.page.Mode == "" && p.WaitingRoom.Page.Mode != promotion.PageModeClaim {
				t.Errorf("mode left empty became %q, want claim", p.WaitingRoom.Page.Mode)
			}
		})
	}
}

// TestPatchRoomPage: a PATCH replaces the queue page's setting as a whole,
// checked as at creation, and nil resets it; the database keeps it, the
// instance that made the change answers it from its set of promotions
// (PageOf) as soon as Patch returns, and another instance at its re-check.
// On both databases.
func TestPatchRoomPage(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			rooms := func() *waitroom.Rooms {
				r, err := waitroom.New(w.client, waitroom.Config{Prefix: w.prefix,
					Keys: []waitroom.Key{{ID: "k1", Secret: bytes.Repeat([]byte{9}, waitroom.MinSecretLen)}}})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			// Here re-checks only every hour: what PageOf answers after the
			// change comes from the change itself.
			here := w.startManager(t, promotion.Config{Instance: "here", Rooms: rooms(), RecheckInterval: time.Hour})
			there := w.startManager(t, promotion.Config{Instance: "there", Rooms: rooms()})
			ctx := t.Context()
			create(t, here, promotion.Promotion{ID: "drop", Stock: 10, WaitingRoom: promotion.WaitingRoom{Enabled: true,
				Page: &promotion.RoomPage{Title: "Before", Texts: map[string]string{"heading": "Wait"}}}})
			create(t, here, promotion.Promotion{ID: "plain", Stock: 10})
			known := func(m *promotion.Manager) bool {
				for _, k := range m.KnownRooms() {
					if k.ID == "drop" {
						return true
					}
				}
				return false
			}
			title := func(m *promotion.Manager) string {
				t.Helper()
				p, err := m.PageOf(ctx, "drop")
				if err != nil {
					t.Fatal(err)
				}
				if p.WaitingRoom.Page == nil {
					return "(defaults)"
				}
				return p.WaitingRoom.Page.Title
			}
			wait.For(t, 10*time.Second, "both instances know the room", func() bool { return known(here) && known(there) })
			if a, b := title(here), title(there); a != "Before" || b != "Before" {
				t.Fatalf("titles before the change: %q here, %q there", a, b)
			}

			page := &promotion.RoomPage{Title: "After", ReturnURL: "https://shop.example/back"}
			v, changed, err := here.PatchChanged(ctx, "drop", promotion.Change{WaitingRoom: &promotion.RoomChange{
				Page: &promotion.RoomPageChange{To: page}}})
			if err != nil {
				t.Fatal(err)
			}
			if pg := v.WaitingRoom.Page; fmt.Sprint(changed) != "[waiting_room.page]" || pg == nil || pg.Title != "After" ||
				pg.Mode != promotion.PageModeClaim || pg.Texts != nil {
				t.Fatalf("changed %v, page %+v; want the whole page replaced, mode claim by default", changed, pg)
			}
			if page.Mode != "" {
				t.Errorf("the caller's setting was changed: %+v", page)
			}
			if got := title(here); got != "After" {
				t.Fatalf("PageOf here right after the change: %q, want After", got)
			}
			wait.For(t, 10*time.Second, "the other instance's re-check", func() bool { return title(there) == "After" })
			if sp, err := w.st.GetPromotion(ctx, "drop"); err != nil || sp.WaitingRoom.Page == nil || sp.WaitingRoom.Page.Title != "After" {
				t.Fatalf("the database: %+v, %v", sp.WaitingRoom.Page, err)
			}

			// Refusals change nothing.
			for _, c := range []struct {
				id    string
				page  promotion.RoomPage
				field string
			}{
				{"drop", promotion.RoomPage{Colors: promotion.RoomPageColors{Accent: "red"}}, "waiting_room.page.colors.accent"},
				{"drop", promotion.RoomPage{Mode: "return"}, "waiting_room.page.return_url"},
				{"drop", promotion.RoomPage{Texts: map[string]string{"footer": "x"}}, "waiting_room.page.texts.footer"},
				{"plain", promotion.RoomPage{Title: "x"}, "waiting_room"},
			} {
				var ve *promotion.ValidationError
				_, err := here.Patch(ctx, c.id, promotion.Change{WaitingRoom: &promotion.RoomChange{Page: &promotion.RoomPageChange{To: &c.page}}})
				if !errors.As(err, &ve) || ve.Field != c.field {
					t.Errorf("PATCH %s page %+v: %v, want a validation error of %s", c.id, c.page, err, c.field)
				}
			}
			if got := title(here); got != "After" {
				t.Fatalf("after refused changes: %q", got)
			}

			// Reset to the defaults.
			if _, changed, err = here.PatchChanged(ctx, "drop", promotion.Change{WaitingRoom: &promotion.RoomChange{
				Page: &promotion.RoomPageChange{}}}); err != nil || fmt.Sprint(changed) != "[waiting_room.page]" {
				t.Fatalf("reset: %v, %v", changed, err)
			}
			if got := title(here); got != "(defaults)" {
				t.Fatalf("PageOf here right after the reset: %q", got)
			}
			wait.For(t, 10*time.Second, "the reset on the other instance", func() bool { return title(there) == "(defaults)" })
		})
	}
}
