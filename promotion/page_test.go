package promotion_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/promotion"
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
