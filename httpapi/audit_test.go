package httpapi_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/dibsio/dibs/httpapi"
)

// lockedBuffer is a log destination the request goroutines write to while
// the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestAuditLogNamesCreatedPromotion: the log line of a creation names the
// promotion it created, as its audit row does, whether the id was asked
// for or made up by the server.
func TestAuditLogNamesCreatedPromotion(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	e := setupWith(t, backend{"single", "sqlite"}, func(c *httpapi.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	e.create(t, `{"id":"logged","stock":1}`)
	made := e.create(t, `{"stock":1}`).body["id"].(string)
	for _, id := range []string{"logged", made} {
		if !strings.Contains(logs.String(), "action=promotion.create promotion="+id+" status=201") {
			t.Errorf("no log line of the creation of %s:\n%s", id, logs.String())
		}
	}
}

// TestWebhookURLForAdminsOnly: a promotion's webhook_url (a partner's
// endpoint, often with a secret in its path) is shown to admin callers
// only, in the promotion and in the list: a bearer admin token or the
// dashboard's session.
func TestWebhookURLForAdminsOnly(t *testing.T) {
	t.Parallel()
	const hook = "https://partner.example/hooks/s3cr3t-path"
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			e := setupInstance(t, b, withWebhooks(t))
			if r := e.create(t, `{"id":"hooked","kind":"webhook","stock":3,"webhook_url":"`+hook+`"}`); r.body["webhook_url"] != hook {
				t.Fatalf("the creation's answer lacks webhook_url: %s", r.raw)
			}
			cookie, _ := e.uiLogin(t, token)
			for _, c := range []struct {
				name    string
				headers []string
				shown   bool
			}{
				{"no token", nil, false},
				{"not an admin token", []string{"Authorization", "Bearer not-a-token"}, false},
				{"admin token", []string{"Authorization", "Bearer " + token}, true},
				{"dashboard session", []string{"Cookie", "dibs_ui=" + cookie.Value}, true},
				{"dashboard session from another origin", []string{"Cookie", "dibs_ui=" + cookie.Value, "Origin", "https://shop.example"}, false},
			} {
				r := e.do(t, "GET", "/v1/promotions/hooked", "", c.headers...)
				if _, shown := r.body["webhook_url"]; r.status != 200 || shown != c.shown {
					t.Errorf("GET the promotion, %s: %d, webhook_url shown %v, want %v: %s", c.name, r.status, shown, c.shown, r.raw)
				}
				r = e.do(t, "GET", "/v1/promotions", "", c.headers...)
				if r.status != 200 || len(r.body["promotions"].([]any)) != 1 {
					t.Fatalf("list, %s: %d %s", c.name, r.status, r.raw)
				}
				if _, shown := r.body["promotions"].([]any)[0].(map[string]any)["webhook_url"]; shown != c.shown {
					t.Errorf("list, %s: webhook_url shown %v, want %v: %s", c.name, shown, c.shown, r.raw)
				}
			}
		})
	}
}
