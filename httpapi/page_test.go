package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestQueuePageSetting: a promotion takes its queue page's setting under
// waiting_room.page and shows it back with its mode filled in; a member
// that breaks its rule, an unknown member and a page without the room are
// refused naming the field; the page of a promotion without a room is a
// 404 page, and another method gets 405.
func TestQueuePageSetting(t *testing.T) {
	t.Parallel()
	e := setup(t, single)
	r := e.create(t, `{"id":"p","stock":5,"waiting_room":{"enabled":true,"page":{"title":"Drop","colors":{"accent":"#0a7f5a"},
		"texts":{"sold_out":"Gone"},"return_url":"https://shop.example/back"}}}`)
	page, _ := r.body["waiting_room"].(map[string]any)["page"].(map[string]any)
	if page["title"] != "Drop" || page["mode"] != "claim" || page["return_url"] != "https://shop.example/back" ||
		page["colors"].(map[string]any)["accent"] != "#0a7f5a" || page["texts"].(map[string]any)["sold_out"] != "Gone" {
		t.Fatalf("created: %s", r.raw)
	}
	if got := e.do(t, "GET", "/v1/promotions/p", ""); !strings.Contains(got.raw, `"page":{"title":"Drop"`) {
		t.Errorf("read back: %s", got.raw)
	}
	if got := e.create(t, `{"id":"bare","stock":5,"waiting_room":{"enabled":true}}`); strings.Contains(got.raw, `"page"`) {
		t.Errorf("a promotion without a page shows one: %s", got.raw)
	}
	for _, tc := range []struct{ page, field string }{
		{`{"colors":{"accent":"red"}}`, "waiting_room.page.colors.accent"},
		{`{"logo_url":"http://shop.example/logo.png"}`, "waiting_room.page.logo_url"},
		{`{"return_url":"https://shop.example/back#x"}`, "waiting_room.page.return_url"},
		{`{"mode":"return"}`, "waiting_room.page.return_url"},
		{`{"mode":"redirect"}`, "waiting_room.page.mode"},
		{`{"texts":{"footer":"x"}}`, "waiting_room.page.texts.footer"},
	} {
		r := e.admin(t, "POST", "/v1/promotions", `{"stock":5,"waiting_room":{"enabled":true,"page":`+tc.page+`}}`)
		if r.status != http.StatusBadRequest || r.code() != "invalid_request" || r.body["field"] != tc.field {
			t.Errorf("page %s: %d %s, want 400 naming %s", tc.page, r.status, r.raw, tc.field)
		}
	}
	if r := e.admin(t, "POST", "/v1/promotions", `{"stock":5,"waiting_room":{"page":{"title":"x"}}}`); r.status != http.StatusBadRequest || r.body["field"] != "waiting_room.page" {
		t.Errorf("a page without the room: %d %s", r.status, r.raw)
	}
	if r := e.admin(t, "POST", "/v1/promotions", `{"stock":5,"waiting_room":{"enabled":true,"page":{"font":"x"}}}`); r.status != http.StatusBadRequest {
		t.Errorf("an unknown member of the page: %d %s", r.status, r.raw)
	}

	e.create(t, `{"id":"noroom","stock":5}`)
	for path, want := range map[string]int{"/w/p": 200, "/w/noroom": 404, "/w/missing": 404} {
		res, err := http.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: %d %s, want %d", path, res.StatusCode, body, want)
		}
	}
	for _, path := range []string{"/w/p", "/w/dibs-waitroom.js"} {
		if r := e.do(t, "POST", path, "{}"); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s: %d %v", path, r.status, r.header)
		}
	}
}

// TestQueuePagePatch: PATCH replaces waiting_room.page as a whole, checked
// as at creation, and the page shows the new setting at once; null resets
// it to the defaults; a bad member, an unknown one and a page of a
// promotion without a room are refused naming the field, changing nothing.
func TestQueuePagePatch(t *testing.T) {
	t.Parallel()
	e := setup(t, single)
	e.create(t, `{"id":"p","stock":5,"name":"Spring","waiting_room":{"enabled":true,"page":{"title":"Drop","texts":{"sold_out":"Gone"}}}}`)
	e.create(t, `{"id":"noroom","stock":5}`)
	pageHTML := func() string {
		t.Helper()
		res, err := http.Get(e.url + "/w/p")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	if h := pageHTML(); !strings.Contains(h, "<title>Drop</title>") {
		t.Fatalf("the page before the change: %s", h)
	}

	r := e.admin(t, "PATCH", "/v1/promotions/p", `{"waiting_room":{"page":{"title":"Last call","colors":{"accent":"#c00"}}}}`)
	page, _ := r.body["waiting_room"].(map[string]any)["page"].(map[string]any)
	if r.status != http.StatusOK || page["title"] != "Last call" || page["mode"] != "claim" || page["texts"] != nil {
		t.Fatalf("PATCH the page: %d %s", r.status, r.raw)
	}
	if h := pageHTML(); !strings.Contains(h, "<title>Last call</title>") || strings.Contains(h, "Gone") {
		t.Errorf("the page after the change: %s", h)
	}

	for _, tc := range []struct{ id, body, field string }{
		{"p", `{"waiting_room":{"page":{"colors":{"accent":"red"}}}}`, "waiting_room.page.colors.accent"},
		{"p", `{"waiting_room":{"page":{"mode":"return"}}}`, "waiting_room.page.return_url"},
		{"p", `{"waiting_room":{"page":{"texts":{"footer":"x"}}}}`, "waiting_room.page.texts.footer"},
		{"p", `{"waiting_room":{"page":{"font":"x"}}}`, "waiting_room.page.font"},
		{"p", `{"waiting_room":{"page":{"title":5}}}`, "waiting_room.page.title"},
		{"p", `{"waiting_room":{"page":"x"}}`, "waiting_room.page"},
		{"noroom", `{"waiting_room":{"page":{"title":"x"}}}`, "waiting_room"},
	} {
		r := e.admin(t, "PATCH", "/v1/promotions/"+tc.id, tc.body)
		if r.status != http.StatusBadRequest || r.code() != "invalid_request" || r.body["field"] != tc.field {
			t.Errorf("PATCH %s %s: %d %s, want 400 naming %s", tc.id, tc.body, r.status, r.raw, tc.field)
		}
	}
	if got := e.do(t, "GET", "/v1/promotions/p", ""); !strings.Contains(got.raw, `"page":{"title":"Last call"`) {
		t.Errorf("refused changes changed the page: %s", got.raw)
	}

	// Another lever keeps the page; null resets it.
	if r := e.admin(t, "PATCH", "/v1/promotions/p", `{"waiting_room":{"message":"Soon"}}`); r.status != http.StatusOK ||
		!strings.Contains(r.raw, `"page":{"title":"Last call"`) {
		t.Fatalf("PATCH the message: %d %s", r.status, r.raw)
	}
	if r := e.admin(t, "PATCH", "/v1/promotions/p", `{"waiting_room":{"page":null}}`); r.status != http.StatusOK || strings.Contains(r.raw, `"page"`) {
		t.Fatalf("PATCH the page to null: %d %s", r.status, r.raw)
	}
	if h := pageHTML(); !strings.Contains(h, "<title>Spring</title>") {
		t.Errorf("the page after the reset (the promotion's name): %s", h)
	}
}
