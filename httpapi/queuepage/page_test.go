package queuepage

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/dibsio/dibs/promotion"
)

// serve runs a Handler whose lookup knows the rooms given, mounted as the
// server mounts it.
func serve(t *testing.T, userTokens bool, rooms map[string]Room) *httptest.Server {
	t.Helper()
	h, err := New(Config{UserTokens: userTokens, Logger: slog.New(slog.DiscardHandler),
		Lookup: func(_ context.Context, id string) (Room, error) {
			if id == "broken" {
				return Room{}, errors.New("database down")
			}
			r, ok := rooms[id]
			if !ok {
				return Room{}, ErrNoPage
			}
			return r, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PagePath, h.Page)
	mux.HandleFunc("GET "+SnippetPath, h.Snippet)
	mux.HandleFunc("GET "+AssetPath, h.Asset)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

var configAttr = regexp.MustCompile(`data-config="([^"]*)"`)

// TestPage: the page of a room carries its setting, every default filled
// in, as data in an attribute (escaped, whatever the texts hold), with the
// CSP and no inline script or style; an unknown room, a malformed id and a
// failed lookup get pages of their own without the script.
func TestPage(t *testing.T) {
	t.Parallel()
	srv := serve(t, true, map[string]Room{
		"drop": {ID: "drop", Name: "Drop", Page: &promotion.RoomPage{Title: `A "quoted" <script>alert(1)</script> title`,
			Colors: promotion.RoomPageColors{Accent: "#0a7f5a"}, Texts: map[string]string{"sold_out": "Gone ' & \" <b>"},
			ReturnURL: "https://shop.example/back", Mode: "return"}},
		"plain": {ID: "plain", Name: "Plain drop"},
	})

	res, body := get(t, srv.URL+"/w/drop")
	if res.StatusCode != 200 || res.Header.Get("Content-Security-Policy") != CSP || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %v", res.StatusCode, res.Header)
	}
	for _, bad := range []string{"<script>alert", "style=", "<style", "onload", "javascript:"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page holds %q:\n%s", bad, body)
		}
	}
	if n := strings.Count(body, "<script"); n != 2 || !strings.Contains(body, `<script src="dibs-waitroom.js" defer></script>`) {
		t.Errorf("the page has %d scripts, want the snippet and page.js only:\n%s", n, body)
	}
	m := configAttr.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no data-config:\n%s", body)
	}
	var cfg pageConfig
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &cfg); err != nil {
		t.Fatalf("data-config %q: %v", m[1], err)
	}
	if cfg.Promotion != "drop" || cfg.Title != `A "quoted" <script>alert(1)</script> title` || cfg.Mode != "return" ||
		cfg.ReturnURL != "https://shop.example/back" || cfg.Colors.Accent != "#0a7f5a" || !cfg.UserTokens ||
		cfg.Texts["sold_out"] != "Gone ' & \" <b>" || cfg.Texts["heading"] != promotion.PageTexts["heading"] ||
		len(cfg.Texts) != len(promotion.PageTexts) {
		t.Errorf("config = %+v", cfg)
	}

	_, body = get(t, srv.URL+"/w/plain")
	m = configAttr.FindStringSubmatch(body)
	if m == nil || json.Unmarshal([]byte(html.UnescapeString(m[1])), &cfg) != nil || cfg.Title != "Plain drop" || cfg.Mode != "claim" {
		t.Errorf("plain page's config: %v %+v", m, cfg)
	}

	for _, tc := range []struct {
		path   string
		status int
	}{{"/w/nope", 404}, {"/w/-bad", 404}, {"/w/broken", 503}} {
		res, body := get(t, srv.URL+tc.path)
		if res.StatusCode != tc.status || res.Header.Get("Content-Security-Policy") != CSP || strings.Contains(body, "<script") ||
			strings.Contains(body, "data-config") {
			t.Errorf("%s: %d, want %d, no script:\n%s", tc.path, res.StatusCode, tc.status, body)
		}
	}
}

// TestAssets: the page's files and the snippet are served with their
// types; anything else under /w/assets/ is 404.
func TestAssets(t *testing.T) {
	t.Parallel()
	srv := serve(t, false, nil)
	for path, ctype := range map[string]string{
		"/w/assets/page.css":  "text/css",
		"/w/assets/page.js":   "text/javascript",
		"/w/dibs-waitroom.js": "text/javascript",
	} {
		res, body := get(t, srv.URL+path)
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), ctype) || body == "" ||
			res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d %v", path, res.StatusCode, res.Header)
		}
	}
	if res, _ := get(t, srv.URL+"/w/dibs-waitroom.js"); res.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("the snippet cannot be loaded by other origins: %v", res.Header)
	}
	for _, path := range []string{"/w/assets/page.html", "/w/assets/dibs-waitroom.js", "/w/assets/..%2fpage.html", "/w/assets/x"} {
		if res, _ := get(t, srv.URL+path); res.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", path, res.StatusCode)
		}
	}
}
