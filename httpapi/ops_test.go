package httpapi_test

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/store"
)

const ciToken = "ci-token-value"

// withOps configures a second named token and the erase secret.
func withOps(c *httpapi.Config) {
	c.AdminTokens = []httpapi.AdminToken{httpapi.HashAdminToken("ci", ciToken)}
	c.EraseSecret = []byte("erase-secret-for-tests")
}

// eachBackendWith is eachBackend with the API's Config adjusted by tune.
func eachBackendWith(t *testing.T, tune func(*httpapi.Config), fn func(t *testing.T, e *env)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			fn(t, setupWith(t, b, tune))
		})
	}
}

func (e *env) as(t *testing.T, tok, method, path, body string) response {
	t.Helper()
	return e.do(t, method, path, body, "Authorization", "Bearer "+tok)
}

// audit returns every audit entry, newest first, and the raw pages.
func (e *env) audit(t *testing.T) ([]map[string]any, string) {
	t.Helper()
	var (
		out []map[string]any
		raw strings.Builder
	)
	path := "/v1/audit?limit=2"
	for range 100 {
		r := e.admin(t, "GET", path, "")
		if r.status != 200 {
			t.Fatalf("audit: %d %s", r.status, r.raw)
		}
		raw.WriteString(r.raw)
		for _, en := range r.body["entries"].([]any) {
			out = append(out, en.(map[string]any))
		}
		next, _ := r.body["next_cursor"].(string)
		if next == "" {
			return out, raw.String()
		}
		path = "/v1/audit?limit=2&cursor=" + next
	}
	t.Fatal("audit pages never ended")
	return nil, ""
}

func TestAdminTokens(t *testing.T) {
	t.Parallel()
	eachBackendWith(t, withOps, func(t *testing.T, e *env) {
		if r := e.as(t, ciToken, "POST", "/v1/promotions", `{"id":"by-ci","stock":1}`); r.status != 201 {
			t.Fatalf("create with the ci token: %d %s", r.status, r.raw)
		}
		e.create(t, `{"id":"by-default","stock":1}`)
		r := e.as(t, ciToken, "POST", "/v1/admin-tokens", `{"name":"alice"}`)
		alice, _ := r.body["token"].(string)
		if r.status != 201 || alice == "" || r.body["created_by"] != "ci" {
			t.Fatalf("create token: %d %s", r.status, r.raw)
		}
		for _, name := range []string{"alice", "ci", "default"} {
			if r := e.admin(t, "POST", "/v1/admin-tokens", `{"name":"`+name+`"}`); r.status != 409 || r.code() != "already_exists" {
				t.Fatalf("token name %s taken: %d %s", name, r.status, r.raw)
			}
		}
		if r := e.admin(t, "POST", "/v1/admin-tokens", `{"name":"-bad"}`); r.status != 400 || r.body["field"] != "name" {
			t.Fatalf("bad name: %d %s", r.status, r.raw)
		}
		if r := e.as(t, alice, "POST", "/v1/promotions/by-ci/close", ""); r.status != 200 {
			t.Fatalf("close with alice's token: %d %s", r.status, r.raw)
		}
		r = e.as(t, alice, "GET", "/v1/admin-tokens", "")
		var names []string
		for _, tk := range r.body["admin_tokens"].([]any) {
			names = append(names, tk.(map[string]any)["name"].(string)+"/"+tk.(map[string]any)["source"].(string))
		}
		if r.status != 200 || strings.Join(names, ",") != "default/config,ci/config,alice/api" {
			t.Fatalf("list tokens: %d %v", r.status, names)
		}
		if strings.Contains(r.raw, alice) || strings.Contains(r.raw, ciToken) || strings.Contains(r.raw, token) {
			t.Fatalf("token list shows a value: %s", r.raw)
		}
		if r := e.admin(t, "DELETE", "/v1/admin-tokens/ci", ""); r.status != 400 {
			t.Fatalf("delete a configured token: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "DELETE", "/v1/admin-tokens/alice", ""); r.status != 204 {
			t.Fatalf("revoke alice: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "DELETE", "/v1/admin-tokens/alice", ""); r.status != 404 {
			t.Fatalf("revoke alice again: %d %s", r.status, r.raw)
		}
		for _, tok := range []string{alice, "nope", ""} {
			if r := e.as(t, tok, "POST", "/v1/promotions/by-default/close", ""); r.status != 401 || r.code() != "unauthorized" {
				t.Fatalf("token %q after revoke: %d %s", tok, r.status, r.raw)
			}
		}

		entries, raw := e.audit(t)
		var got []string
		for _, en := range entries {
			got = append(got, fmt.Sprintf("%s %s %v", en["actor"], en["action"], en["status"]))
		}
		slices.Reverse(got)
		want := []string{
			"ci promotion.create 201", "default promotion.create 201", "ci admin_token.create 201",
			"default admin_token.create 409", "default admin_token.create 409", "default admin_token.create 409",
			"default admin_token.create 400", "alice promotion.close 200", "default admin_token.delete 400",
			"default admin_token.delete 204", "default admin_token.delete 404",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("audit:\n got %q\nwant %q", got, want)
		}
		for _, secret := range []string{alice, ciToken, token} {
			if strings.Contains(raw, secret) {
				t.Fatalf("the audit log holds a token: %s", raw)
			}
		}
		if entries[0]["detail"].(map[string]any)["name"] != "alice" {
			t.Fatalf("token deletion's detail: %v", entries[0])
		}
	})
}

func TestAuditActions(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.create(t, `{"id":"au","stock":3}`)
		e.create(t, `{"stock":3}`) // an id made up by the server
		// stock is sent with the value it has: not a change.
		if r := e.admin(t, "PATCH", "/v1/promotions/au", `{"name":"renamed","stock":3,"paused":true}`); r.status != 200 {
			t.Fatalf("patch: %d %s", r.status, r.raw)
		}
		for range 2 { // the second is replayed from its Idempotency-Key
			r := e.do(t, "POST", "/v1/promotions/au/close", "", "Authorization", "Bearer "+token, "Idempotency-Key", "k1")
			if r.status != 200 {
				t.Fatalf("close: %d %s", r.status, r.raw)
			}
		}
		if r := e.admin(t, "POST", "/v1/promotions/au/dead-letters/replay", `{"all":true}`); r.status != 202 {
			t.Fatalf("replay: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "POST", "/v1/promotions/au/dead-letters/replay", `{"claim_ids":["au#2","au#3"]}`); r.status != 202 {
			t.Fatalf("replay: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "POST", "/v1/promotions/au/dead-letters/void", `{"claim_ids":["au#1"]}`); r.status != 200 {
			t.Fatalf("void: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "POST", "/v1/promotions/missing/close", ""); r.status != 404 {
			t.Fatalf("close missing: %d %s", r.status, r.raw)
		}
		// Reads are not audited.
		e.admin(t, "GET", "/v1/promotions/au/dead-letters", "")
		entries, raw := e.audit(t)
		type row struct {
			action, promo string
			status        float64
			replayed      bool
			extra         string // what the action's detail says
		}
		var got []row
		made := ""
		for _, en := range entries {
			d := en["detail"].(map[string]any)
			p, _ := en["promotion_id"].(string)
			if en["action"] == "promotion.create" && p != "au" {
				made, p = p, "<made>"
			}
			var extra []string
			for _, k := range []string{"fields", "claim_ids", "all", "count"} {
				if v, ok := d[k]; ok {
					extra = append(extra, fmt.Sprintf("%s=%v", k, v))
				}
			}
			got = append(got, row{en["action"].(string), p, en["status"].(float64), d["replayed"] == true, strings.Join(extra, " ")})
			if en["actor"] != "default" || d["path"] == nil {
				t.Errorf("entry %v", en)
			}
		}
		slices.Reverse(got)
		want := []row{
			{"promotion.create", "au", 201, false, ""}, {"promotion.create", "<made>", 201, false, ""},
			{"promotion.change", "au", 200, false, "fields=[name paused]"},
			{"promotion.close", "au", 200, false, ""}, {"promotion.close", "au", 200, true, ""},
			{"dead_letters.replay", "au", 202, false, "all=true count=0"},
			{"dead_letters.replay", "au", 202, false, "claim_ids=[au#2 au#3] count=0"},
			{"dead_letters.void", "au", 200, false, "claim_ids=[au#1] count=0"}, {"promotion.close", "missing", 404, false, ""},
		}
		if !strings.HasPrefix(made, "p-") {
			t.Errorf("the created promotion's id in its audit entry: %q", made)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("audit:\n got %+v\nwant %+v", got, want)
		}
		if strings.Contains(raw, token) {
			t.Fatalf("the audit log holds the token: %s", raw)
		}
		if r := e.do(t, "GET", "/v1/audit", ""); r.status != 401 {
			t.Fatalf("audit without a token: %d", r.status)
		}
		if r := e.admin(t, "GET", "/v1/audit?cursor=eA", ""); r.status != 400 || r.body["field"] != "cursor" {
			t.Fatalf("bad cursor: %d %s", r.status, r.raw)
		}
	})
}

// TestWinners pages the issued claims of a promotion as JSON and exports
// them as CSV: every row once, in rank order.
func TestWinners(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.create(t, `{"id":"win","stock":5000}`)
		const n = 2500
		at := time.Now()
		var batch []store.Issue
		for r := int64(n); r >= 1; r-- {
			batch = append(batch, store.Issue{ClaimID: fmt.Sprintf("win#%d", r), PromotionID: "win",
				UserID: fmt.Sprintf("u%d", r), Rank: r, Slot: 1, AcceptedAt: at,
				Grant: store.Grant{Code: fmt.Sprintf("CODE%d", r), Value: 1}})
		}
		if _, err := e.store.IssueBatch(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		var ranks []int64
		path := "/v1/promotions/win/claims?status=issued&limit=1000"
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("too many pages")
			}
			r := e.admin(t, "GET", path, "")
			if r.status != 200 {
				t.Fatalf("winners: %d %s", r.status, r.raw)
			}
			for _, c := range r.body["claims"].([]any) {
				c := c.(map[string]any)
				rank := int64(c["rank"].(float64))
				if c["user_id"] != fmt.Sprintf("u%d", rank) || c["claim_id"] != fmt.Sprintf("win#%d", rank) || c["issued_at"] == nil ||
					c["code"] != fmt.Sprintf("CODE%d", rank) {
					t.Fatalf("winner %v", c)
				}
				ranks = append(ranks, rank)
			}
			next, _ := r.body["next_cursor"].(string)
			if next == "" {
				break
			}
			path = "/v1/promotions/win/claims?status=issued&limit=1000&cursor=" + next
		}
		checkRanks(t, "json", ranks, n)

		req, _ := http.NewRequest("GET", e.url+"/v1/promotions/win/claims?status=issued", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "text/csv")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/csv") {
			t.Fatalf("csv: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
		}
		recs, err := csv.NewReader(res.Body).ReadAll()
		if err != nil {
			t.Fatalf("csv: %v", err)
		}
		if strings.Join(recs[0], ",") != "rank,claim_id,user_id,slot,accepted_at,issued_at,code" {
			t.Fatalf("csv header %v", recs[0])
		}
		ranks = ranks[:0]
		for _, rec := range recs[1:] {
			rank, _ := strconv.ParseInt(rec[0], 10, 64)
			if rec[2] != fmt.Sprintf("u%d", rank) || rec[3] != "1" || rec[6] != fmt.Sprintf("CODE%d", rank) {
				t.Fatalf("csv row %v", rec)
			}
			ranks = append(ranks, rank)
		}
		checkRanks(t, "csv", ranks, n)

		for _, tt := range []struct {
			path, code string
			status     int
		}{
			{"/v1/promotions/win/claims?status=pending", "invalid_request", 400},
			{"/v1/promotions/win/claims?cursor=eA", "invalid_request", 400},
			{"/v1/promotions/missing/claims?status=issued", "not_found", 404},
		} {
			if r := e.admin(t, "GET", tt.path, ""); r.status != tt.status || r.code() != tt.code {
				t.Errorf("%s: %d %s", tt.path, r.status, r.raw)
			}
		}
		if r := e.do(t, "GET", "/v1/promotions/win/claims", ""); r.status != 401 {
			t.Errorf("winners without a token: %d", r.status)
		}
	})
}

func checkRanks(t *testing.T, what string, ranks []int64, n int) {
	t.Helper()
	if len(ranks) != n {
		t.Fatalf("%s: %d rows, want %d", what, len(ranks), n)
	}
	for i, r := range ranks {
		if r != int64(i+1) {
			t.Fatalf("%s: row %d has rank %d", what, i, r)
		}
	}
}

func (e *env) list(t *testing.T, query string) []string {
	t.Helper()
	var ids []string
	path := "/v1/promotions?limit=2&" + query
	for range 50 {
		r := e.do(t, "GET", path, "")
		if r.status != 200 {
			t.Fatalf("list %s: %d %s", query, r.status, r.raw)
		}
		for _, p := range r.body["promotions"].([]any) {
			ids = append(ids, p.(map[string]any)["id"].(string))
		}
		next, _ := r.body["next_cursor"].(string)
		if next == "" {
			return ids
		}
		path = "/v1/promotions?limit=2&" + query + "&cursor=" + next
	}
	t.Fatal("list pages never ended")
	return nil
}

func TestPromotionFiltersAndArchive(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		now := time.Now().UTC()
		f := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
		e.create(t, `{"id":"f-sched","stock":1,"starts_at":"`+f(time.Hour)+`"}`)
		e.create(t, `{"id":"f-open","stock":5}`)
		e.create(t, `{"id":"f-sold","stock":1}`)
		if r := e.claim(t, "f-sold", "u1"); r.status != 202 {
			t.Fatalf("claim: %d %s", r.status, r.raw)
		}
		e.create(t, `{"id":"f-past","stock":1,"starts_at":"`+f(-2*time.Hour)+`","ends_at":"`+f(-time.Hour)+`","allow_past_ends_at":true}`)
		e.create(t, `{"id":"f-closed","stock":1}`)
		e.admin(t, "POST", "/v1/promotions/f-closed/close", "")

		all := []string{"f-closed", "f-open", "f-past", "f-sched", "f-sold"}
		for _, tt := range []struct {
			query string
			want  []string
		}{
			{"", all},
			{"state=scheduled", []string{"f-sched"}},
			{"state=open", []string{"f-open"}},
			{"state=sold_out", []string{"f-sold"}},
			{"state=ended", []string{"f-closed", "f-past"}},
			{"state=closed", []string{"f-closed"}},
			{"state=archived", nil},
		} {
			if got := e.list(t, tt.query); !slices.Equal(got, tt.want) {
				t.Errorf("%q: got %v, want %v", tt.query, got, tt.want)
			}
		}
		asc, desc := e.list(t, "sort=created_at"), e.list(t, "sort=-created_at")
		slices.Reverse(desc)
		if len(asc) != 5 || !slices.Equal(asc, desc) {
			t.Errorf("created_at %v, -created_at reversed %v", asc, desc)
		}
		if asc[0] != "f-sched" || asc[4] != "f-closed" {
			t.Errorf("created_at order %v", asc)
		}

		for _, id := range []string{"f-open", "f-sched"} {
			if r := e.admin(t, "POST", "/v1/promotions/"+id+"/archive", ""); r.status != 409 || r.code() != "not_ended" {
				t.Fatalf("archive %s: %d %s", id, r.status, r.raw)
			}
		}
		for _, id := range []string{"f-closed", "f-past", "f-past"} {
			if r := e.admin(t, "POST", "/v1/promotions/"+id+"/archive", ""); r.status != 200 || r.body["archived_at"] == nil {
				t.Fatalf("archive %s: %d %s", id, r.status, r.raw)
			}
		}
		if r := e.admin(t, "POST", "/v1/promotions/nope/archive", ""); r.status != 404 {
			t.Fatalf("archive unknown: %d %s", r.status, r.raw)
		}
		if got := e.list(t, ""); !slices.Equal(got, []string{"f-open", "f-sched", "f-sold"}) {
			t.Errorf("after archive: %v", got)
		}
		if got := e.list(t, "state=archived"); !slices.Equal(got, []string{"f-closed", "f-past"}) {
			t.Errorf("archived: %v", got)
		}
		if got := e.list(t, "state=ended"); len(got) != 0 {
			t.Errorf("ended, archived left out: %v", got)
		}
		if r := e.do(t, "GET", "/v1/promotions/f-past", ""); r.status != 200 || r.body["archived_at"] == nil {
			t.Fatalf("archived by id: %d %s", r.status, r.raw)
		}
		for _, q := range []string{"state=gone", "sort=name", "sort=created_at&cursor=eA"} {
			if r := e.do(t, "GET", "/v1/promotions?"+q, ""); r.status != 400 || r.code() != "invalid_request" {
				t.Errorf("%s: %d %s", q, r.status, r.raw)
			}
		}
	})
}

func TestEndsAtInThePast(t *testing.T) {
	t.Parallel()
	e := setup(t, backends[0])
	now := time.Now().UTC()
	f := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	for _, body := range []string{
		`{"id":"past1","stock":1,"starts_at":"` + f(-2*time.Hour) + `","ends_at":"` + f(-time.Hour) + `"}`,
		// Without ends_at the default end (starts_at + 24 h) has passed too.
		`{"id":"past2","stock":1,"starts_at":"` + f(-48*time.Hour) + `"}`,
	} {
		r := e.admin(t, "POST", "/v1/promotions", body)
		if r.status != 400 || r.code() != "invalid_request" || r.body["field"] != "ends_at" {
			t.Fatalf("%s: %d %s", body, r.status, r.raw)
		}
	}
	r := e.create(t, `{"id":"past3","stock":1,"starts_at":"`+f(-2*time.Hour)+`","ends_at":"`+f(-time.Hour)+`","allow_past_ends_at":true}`)
	if r.body["state"] != "ended" {
		t.Fatalf("back-filled promotion: %s", r.raw)
	}
	if r := e.claim(t, "past3", "u1"); r.status != 403 || r.code() != "ended" {
		t.Fatalf("claim on it: %d %s", r.status, r.raw)
	}
}

// TestGrantsBeforeStart: grants uploaded before starts_at are issued at
// once (docs/api.md says why).
func TestGrantsBeforeStart(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		start := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		e.create(t, `{"id":"early","mode":"grant","starts_at":"`+start+`"}`)
		if r := e.admin(t, "POST", "/v1/promotions/early/grants", `{"user_ids":["a","b","c"]}`); r.status != 202 {
			t.Fatalf("grant: %d %s", r.status, r.raw)
		}
		e.waitIssued(t, "early", 3)
		if r := e.do(t, "GET", "/v1/promotions/early", ""); r.body["state"] != "scheduled" {
			t.Fatalf("state %v", r.body["state"])
		}
	})
}

func TestEraseUser(t *testing.T) {
	t.Parallel()
	t.Run("no secret", func(t *testing.T) {
		t.Parallel()
		e := setup(t, backends[0])
		if r := e.admin(t, "DELETE", "/v1/users/someone", ""); r.status != 404 {
			t.Fatalf("erase without a secret: %d %s", r.status, r.raw)
		}
	})
	eachBackendWith(t, withOps, func(t *testing.T, e *env) {
		e.create(t, `{"id":"er","stock":10,"per_user_limit":2}`)
		e.create(t, `{"id":"er-g","mode":"grant"}`)
		var wg sync.WaitGroup
		for _, u := range []string{"alice-raw", "alice-raw", "bob"} {
			wg.Go(func() { e.claim(t, "er", u) })
		}
		wg.Wait()
		e.admin(t, "POST", "/v1/promotions/er-g/grants", `{"user_ids":["alice-raw","bob"]}`)
		before := map[string]any{"er": e.waitIssued(t, "er", 3), "er-g": e.waitIssued(t, "er-g", 2)}

		for range 2 { // the second finds nothing left and still answers 204
			if r := e.admin(t, "DELETE", "/v1/users/alice-raw", ""); r.status != 204 {
				t.Fatalf("erase: %d %s", r.status, r.raw)
			}
		}
		erased := httpapi.ErasedID([]byte("erase-secret-for-tests"), "alice-raw")
		for id, c := range before {
			if got := e.counts(t, id); fmt.Sprint(got) != fmt.Sprint(c) {
				t.Errorf("%s counts after erase %v, want %v", id, got, c)
			}
		}
		for _, id := range []string{"er", "er-g"} {
			r := e.admin(t, "GET", "/v1/promotions/"+id+"/claims?status=issued", "")
			if strings.Contains(r.raw, "alice-raw") || !strings.Contains(r.raw, erased) || !strings.Contains(r.raw, "bob") {
				t.Fatalf("%s winners after erase: %s", id, r.raw)
			}
		}
		entries, raw := e.audit(t)
		if strings.Contains(raw, "alice-raw") {
			t.Fatalf("the audit log names the erased user: %s", raw)
		}
		d := entries[1]["detail"].(map[string]any)
		if entries[1]["action"] != "user.erase" || d["user"] != erased || d["issued"].(float64) != 3 {
			t.Fatalf("erase audit entry %v", entries[1])
		}
		if r := e.admin(t, "DELETE", "/v1/users/-bad", ""); r.status != 400 {
			t.Fatalf("bad id: %d %s", r.status, r.raw)
		}
	})
}
