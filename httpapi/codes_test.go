package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
)

// TestCodes uploads a coupon promotion's pool as JSON (all or nothing) and
// NDJSON (line by line) with duplicates, refuses what cannot take a pool,
// and issues claims from the pool: a claim beyond it is refused sold_out,
// never accepted without a code, until more codes are uploaded.
func TestCodes(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		start := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		e.create(t, fmt.Sprintf(`{"id":"pooled","kind":"coupon","stock":3,"value":250,"starts_at":%q}`, start))
		r := e.admin(t, "POST", "/v1/promotions/pooled/codes", `{"codes":["PX-1","PX-1","bad code"]}`)
		if r.status != 400 || r.code() != "invalid_request" {
			t.Fatalf("bad code: %d %s", r.status, r.raw)
		}
		r = e.admin(t, "POST", "/v1/promotions/pooled/codes", `{"codes":["PX-1","PX-1"]}`)
		if r.status != 200 || r.body["added"] != 1.0 || r.body["duplicates"] != 1.0 || r.body["total"] != 1.0 || r.body["stock"] != 3.0 {
			t.Fatalf("json upload: %d %s", r.status, r.raw)
		}
		var nd bytes.Buffer
		nd.WriteString(`{"code":"PX-1"}` + "\n") // duplicate of the first upload
		nd.WriteString(`{"code":"PX-2"}` + "\n")
		nd.WriteString(`{"code":"has space"}` + "\n") // line 3 rejected
		nd.WriteString(`{"code":"PX-2"}`)             // duplicate within the upload
		req, _ := http.NewRequest("POST", e.url+"/v1/promotions/pooled/codes", &nd)
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Added, Duplicates, Total, Free, Stock, Rejected int
			Errors                                          []struct{ Line int }
		}
		_ = json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if res.StatusCode != 200 || out.Added != 1 || out.Duplicates != 2 || out.Total != 2 || out.Free != 2 ||
			out.Rejected != 1 || len(out.Errors) != 1 || out.Errors[0].Line != 3 {
			t.Fatalf("ndjson upload: %d %+v", res.StatusCode, out)
		}

		e.create(t, `{"id":"pts","kind":"point","stock":3}`)
		if r := e.admin(t, "POST", "/v1/promotions/pts/codes", `{"codes":["A"]}`); r.status != 409 || r.code() != "no_pool_for_kind" {
			t.Fatalf("codes for points: %d %s", r.status, r.raw)
		}
		e.create(t, `{"id":"late","kind":"coupon","stock":3}`)
		if r := e.admin(t, "POST", "/v1/promotions/late/codes", `{"codes":["A"]}`); r.status != 409 || r.code() != "pool_after_start" {
			t.Fatalf("first codes after the start: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "POST", "/v1/promotions/none/codes", `{"codes":["A"]}`); r.status != 404 {
			t.Fatalf("codes for an unknown promotion: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "POST", "/v1/promotions", `{"id":"hook","kind":"webhook","stock":5,"webhook_url":"https://partner.example/issue"}`); r.status != 400 || r.body["field"] != "kind" {
			t.Fatalf("webhook promotion without a secret: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "POST", "/v1/promotions", `{"id":"hook2","kind":"coupon","stock":5,"webhook_url":"https://partner.example/issue"}`); r.status != 400 || r.body["field"] != "webhook_url" {
			t.Fatalf("webhook_url on a coupon: %d %s", r.status, r.raw)
		}

		// Three users from a pool of two: two are accepted and issued pool
		// codes, the third is told sold_out (nothing taken, nothing
		// dead-lettered) until a code is added after the start.
		for _, u := range []string{"u1", "u2"} {
			wait.For(t, 30*time.Second, u+"'s claim accepted", func() bool {
				return e.claim(t, "pooled", u).status == 202
			})
		}
		if r := e.claim(t, "pooled", "u3"); r.status != 410 || r.code() != "sold_out" {
			t.Fatalf("a claim beyond the pool: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "POST", "/v1/promotions/pooled/codes", `{"codes":["PX-3"]}`); r.status != 200 || r.body["total"] != 3.0 {
			t.Fatalf("top-up after the start: %d %s", r.status, r.raw)
		}
		wait.For(t, 30*time.Second, "u3's claim accepted", func() bool {
			return e.claim(t, "pooled", "u3").status == 202
		})
		got := map[string]bool{}
		wait.For(t, 30*time.Second, "three issued", func() bool {
			c := e.counts(t, "pooled")
			return c["issued"] == 3.0 && c["failed"] == 0.0
		})
		for _, u := range []string{"u1", "u2", "u3"} {
			r := e.do(t, "GET", "/v1/promotions/pooled/claims/"+u, "")
			var code string
			if cs, _ := r.body["claims"].([]any); len(cs) == 1 {
				code, _ = cs[0].(map[string]any)["code"].(string)
			}
			if !strings.HasPrefix(code, "PX-") || got[code] {
				t.Fatalf("%s issued with code %q (seen %v): %s", u, code, got, r.raw)
			}
			got[code] = true
		}
		if r := e.claim(t, "pooled", "u4"); r.status != 410 || r.code() != "sold_out" {
			t.Fatalf("a claim beyond the topped-up pool: %d %s", r.status, r.raw)
		}
		if dl := e.admin(t, "GET", "/v1/promotions/pooled/dead-letters", ""); strings.Contains(dl.raw, "no free code") {
			t.Fatalf("a claim was accepted beyond the pool: %s", dl.raw)
		}
	})
}
