package httpapi_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/httpapi"
)

// uiLogin logs in to the dashboard with tok from the page's own origin and
// returns the session cookie and the CSRF token.
func (e *env) uiLogin(t *testing.T, tok string) (*http.Cookie, string) {
	t.Helper()
	r := e.do(t, "POST", "/ui/login", `{"token":"`+tok+`"}`, "Origin", e.url)
	if r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r.raw)
	}
	var c *http.Cookie
	for _, ck := range (&http.Response{Header: r.header}).Cookies() {
		if ck.Name == httpapi.UICookie {
			c = ck
		}
	}
	if c == nil {
		t.Fatalf("login set no %s cookie: %v", httpapi.UICookie, r.header)
	}
	return c, r.body["csrf"].(string)
}

// TestDashboardAuth checks the dashboard's session: the login takes every
// admin token and refuses others and other origins, the cookie holds no
// token and is HttpOnly and SameSite Strict, reads need the cookie alone,
// changes need the page's Origin and the CSRF token too, a revoked token or
// a logout ends the session, and the bearer path is as before.
func TestDashboardAuth(t *testing.T) {
	t.Parallel()
	e := setup(t, backend{"single", "sqlite"})
	e.create(t, `{"id":"ua","stock":5}`)

	t.Run("page", func(t *testing.T) {
		r := e.do(t, "GET", "/ui/", "")
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
			!strings.Contains(r.header.Get("Content-Security-Policy"), "default-src 'none'") ||
			!strings.Contains(r.raw, `<label for="token">`) {
			t.Fatalf("page: %d %v %.200s", r.status, r.header, r.raw)
		}
		for _, f := range []string{"app.js", "charts.js", "app.css"} {
			if r := e.do(t, "GET", "/ui/"+f, ""); r.status != 200 {
				t.Fatalf("%s: %d", f, r.status)
			}
		}
	})

	t.Run("login refusals", func(t *testing.T) {
		cases := []struct {
			name, body, origin string
			status             int
		}{
			{"wrong token", `{"token":"nope"}`, e.url, 401},
			{"empty token", `{"token":""}`, e.url, 401},
			{"no origin", `{"token":"` + token + `"}`, "", 403},
			{"other origin", `{"token":"` + token + `"}`, "https://evil.example", 403},
			{"malformed", `{"token":`, e.url, 400},
		}
		for _, c := range cases {
			h := []string{}
			if c.origin != "" {
				h = append(h, "Origin", c.origin)
			}
			r := e.do(t, "POST", "/ui/login", c.body, h...)
			if r.status != c.status || r.header.Get("Set-Cookie") != "" {
				t.Errorf("%s: %d %s %v", c.name, r.status, r.raw, r.header)
			}
		}
	})

	t.Run("session", func(t *testing.T) {
		c, csrf := e.uiLogin(t, token)
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure ||
			strings.Contains(c.Value, token) || c.MaxAge != int(httpapi.UISessionTTL.Seconds()) {
			t.Fatalf("cookie: %+v", c)
		}
		ck := "dibs_ui=" + c.Value
		if r := e.do(t, "GET", "/ui/session", "", "Cookie", ck); r.status != 200 || r.body["name"] != "default" || r.body["csrf"] != csrf {
			t.Fatalf("session: %d %s", r.status, r.raw)
		}
		if r := e.do(t, "GET", "/v1/promotions/ua/dead-letters", "", "Cookie", ck); r.status != 200 {
			t.Fatalf("read with the cookie: %d %s", r.status, r.raw)
		}
		for _, h := range [][]string{
			{"Cookie", ck},                       // neither
			{"Cookie", ck, "Origin", e.url},      // no CSRF token
			{"Cookie", ck, "X-CSRF-Token", csrf}, // no Origin
			{"Cookie", ck, "Origin", e.url, "X-CSRF-Token", "forged"},
			{"Cookie", ck, "Origin", "http://evil.example", "X-CSRF-Token", csrf},
		} {
			if r := e.do(t, "POST", "/v1/promotions/ua/close", "", h...); r.status != 403 || r.code() != "forbidden" {
				t.Fatalf("close with %v: %d %s", h, r.status, r.raw)
			}
		}
		if r := e.do(t, "GET", "/v1/promotions/ua", ""); r.body["closed_at"] != nil {
			t.Fatalf("a refused close closed it: %s", r.raw)
		}
		// A bearer token, even a wrong one, is checked as before: the
		// cookie does not rescue it.
		if r := e.do(t, "POST", "/v1/promotions/ua/close", "", "Cookie", ck, "Origin", e.url, "X-CSRF-Token", csrf,
			"Authorization", "Bearer wrong"); r.status != 401 {
			t.Fatalf("wrong bearer with a cookie: %d %s", r.status, r.raw)
		}
		if r := e.do(t, "POST", "/v1/promotions/ua/close", "", "Cookie", ck, "Origin", e.url, "X-CSRF-Token", csrf); r.status != 200 {
			t.Fatalf("close from the page: %d %s", r.status, r.raw)
		}
		entries, _ := e.audit(t)
		if entries[0]["actor"] != "default" || entries[0]["action"] != "promotion.close" {
			t.Fatalf("audit of the page's close: %v", entries[0])
		}
		// Logout needs the CSRF token too, then ends the session.
		if r := e.do(t, "POST", "/ui/logout", "", "Cookie", ck, "Origin", e.url); r.status != 403 {
			t.Fatalf("logout without CSRF: %d %s", r.status, r.raw)
		}
		if r := e.do(t, "POST", "/ui/logout", "", "Cookie", ck, "Origin", e.url, "X-CSRF-Token", csrf); r.status != 204 ||
			!strings.Contains(r.header.Get("Set-Cookie"), "Max-Age=0") {
			t.Fatalf("logout: %d %v", r.status, r.header)
		}
		if r := e.do(t, "GET", "/v1/promotions/ua/dead-letters", "", "Cookie", ck); r.status != 401 {
			t.Fatalf("cookie after logout: %d %s", r.status, r.raw)
		}
	})

	t.Run("named token revoked", func(t *testing.T) {
		r := e.admin(t, "POST", "/v1/admin-tokens", `{"name":"carol"}`)
		if r.status != 201 {
			t.Fatalf("create token: %d %s", r.status, r.raw)
		}
		c, _ := e.uiLogin(t, r.body["token"].(string))
		ck := "dibs_ui=" + c.Value
		if r := e.do(t, "GET", "/ui/session", "", "Cookie", ck); r.status != 200 || r.body["name"] != "carol" {
			t.Fatalf("session: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "DELETE", "/v1/admin-tokens/carol", ""); r.status != 204 {
			t.Fatalf("delete token: %d %s", r.status, r.raw)
		}
		if r := e.do(t, "GET", "/v1/audit", "", "Cookie", ck); r.status != 401 {
			t.Fatalf("session of a revoked token: %d %s", r.status, r.raw)
		}
	})

	t.Run("forged cookie", func(t *testing.T) {
		for _, v := range []string{"x", strings.Repeat("A", 500), token} {
			if r := e.do(t, "GET", "/ui/session", "", "Cookie", "dibs_ui="+v); r.status != 401 {
				t.Fatalf("cookie %.20q: %d %s", v, r.status, r.raw)
			}
		}
	})

	t.Run("events", func(t *testing.T) {
		if r := e.do(t, "GET", "/ui/events", ""); r.status != 401 {
			t.Fatalf("events without a session: %d %s", r.status, r.raw)
		}
		c, _ := e.uiLogin(t, token)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/ui/events", nil)
		req.AddCookie(c)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("events: %d %v", res.StatusCode, res.Header)
		}
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		var names []string
		for len(names) < 3 && sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				names = append(names, name)
			}
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && len(names) == 2 && !strings.Contains(data, `"id":"ua"`) {
				t.Fatalf("snapshot without the promotion: %s", data)
			}
		}
		if strings.Join(names, ",") != "history,snapshot,snapshot" {
			t.Fatalf("events: %v (%v)", names, sc.Err())
		}
	})
}

// TestDashboardStreamsBounded: the dashboard's streams count among
// Config.MaxStreams; past them the answer is 503 overloaded.
func TestDashboardStreamsBounded(t *testing.T) {
	t.Parallel()
	e := setupWith(t, backend{"single", "sqlite"}, func(c *httpapi.Config) { c.MaxStreams = 1 })
	c, _ := e.uiLogin(t, token)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/ui/events", nil)
	req.AddCookie(c)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("first stream: %d", res.StatusCode)
	}
	if r := e.do(t, "GET", "/ui/events", "", "Cookie", "dibs_ui="+c.Value); r.status != 503 || r.code() != "overloaded" || r.header.Get("Retry-After") == "" {
		t.Fatalf("second stream: %d %s", r.status, r.raw)
	}
}
