package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
)

// TestEventsFeed reads the outbox page by page: every event once, in seq
// order, a next_cursor that is never null, the type filter, and bad input
// answered 4xx.
func TestEventsFeed(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.create(t, `{"id":"feed","name":"Feed","stock":3,"per_user_limit":1,
			"ends_at":"2099-01-01T00:00:00Z"}`)
		for _, u := range []string{"u1", "u2", "u3"} {
			if r := e.claim(t, "feed", u); r.status != http.StatusAccepted {
				t.Fatalf("claim: %d %s", r.status, r.raw)
			}
		}
		e.waitIssued(t, "feed", 3)

		// The claims' 6 events and promotion.opened, sold_out.
		read := func(cursor string, query string) ([]map[string]any, string) {
			t.Helper()
			r := e.admin(t, "GET", "/v1/events?limit=2&cursor="+url.QueryEscape(cursor)+query, "")
			if r.status != http.StatusOK {
				t.Fatalf("feed: %d %s", r.status, r.raw)
			}
			next, ok := r.body["next_cursor"].(string)
			if !ok || next == "" {
				t.Fatalf("next_cursor %v is not a cursor", r.body["next_cursor"])
			}
			var out []map[string]any
			for _, x := range r.body["events"].([]any) {
				out = append(out, x.(map[string]any))
			}
			return out, next
		}
		var (
			all    []map[string]any
			cursor string
		)
		wait.For(t, 10*time.Second, "8 events in the feed", func() bool {
			for {
				page, next := read(cursor, "")
				if len(page) == 0 {
					if next != cursor && cursor != "" {
						t.Fatalf("an empty page moved the cursor from %q to %q", cursor, next)
					}
					cursor = next
					return len(all) >= 8
				}
				all = append(all, page...)
				cursor = next
			}
		})
		seen := map[string]bool{}
		last := 0.0
		types := map[string]int{}
		for _, ev := range all {
			id, _ := ev["id"].(string)
			seq, _ := ev["seq"].(float64)
			if seen[id] || seq <= last {
				t.Fatalf("event %s (seq %v) after seq %v, or twice", id, seq, last)
			}
			seen[id], last = true, seq
			types[ev["type"].(string)]++
			if ev["promotion_id"] != "feed" || ev["data"] == nil || ev["at"] == "" {
				t.Fatalf("event %v", ev)
			}
			if strings.HasPrefix(ev["type"].(string), "claim.") != (ev["claim_id"] != nil) {
				t.Fatalf("claim_id of %v", ev)
			}
		}
		want := map[string]int{"claim.accepted": 3, "claim.issued": 3, "promotion.opened": 1, "promotion.sold_out": 1}
		for typ, n := range want {
			if types[typ] != n {
				t.Fatalf("types %v, want %v", types, want)
			}
		}

		// The type filter.
		issued, _ := read("", "&type=claim.issued&limit=100")
		for _, ev := range issued {
			if ev["type"] != "claim.issued" {
				t.Fatalf("filter let %v through", ev["type"])
			}
		}
		if both, _ := read("", "&type=promotion.opened,promotion.sold_out"); len(both) != 2 {
			t.Fatalf("two types: %d events", len(both))
		}

		// Bad input.
		for _, c := range []struct{ query, field string }{
			{"cursor=" + base64.RawURLEncoding.EncodeToString([]byte("x12")), "cursor"},
			{"cursor=" + base64.RawURLEncoding.EncodeToString([]byte("e-1")), "cursor"},
			{"cursor=" + base64.RawURLEncoding.EncodeToString([]byte("e99999999999999999999")), "cursor"},
			{"cursor=!!", "cursor"},
			{"limit=0", "limit"},
			{"type=claim.made", "type"},
			{"type=", "type"},
		} {
			r := e.admin(t, "GET", "/v1/events?"+c.query, "")
			if r.status != http.StatusBadRequest || r.code() != "invalid_request" || r.body["field"] != c.field {
				t.Errorf("?%s: %d %s, want 400 invalid_request on %s", c.query, r.status, r.raw, c.field)
			}
		}
		if r := e.do(t, "GET", "/v1/events", ""); r.status != http.StatusUnauthorized {
			t.Fatalf("without the admin token: %d", r.status)
		}
	})
}
