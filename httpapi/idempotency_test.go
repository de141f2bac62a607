package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/httpapi"
)

// keyed sends an admin request with an Idempotency-Key.
func (e *env) keyed(t *testing.T, method, path, body, key string) response {
	t.Helper()
	return e.do(t, method, path, body, "Authorization", "Bearer "+token, "Idempotency-Key", key)
}

func (e *env) promotionCount(t *testing.T) int {
	t.Helper()
	r := e.do(t, "GET", "/v1/promotions?limit=1000", "")
	if r.status != http.StatusOK {
		t.Fatalf("list: %d %s", r.status, r.raw)
	}
	return len(r.body["promotions"].([]any))
}

// TestAdminIdempotencyKey: a retried admin POST with the same key and body
// gets the first answer again and changes nothing; the key with another
// request is refused; a malformed key is a 400 that changes nothing.
func TestAdminIdempotencyKey(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		const body = `{"stock":5,"name":"keyed"}` // no id: each run would make a new promotion
		first := e.keyed(t, "POST", "/v1/promotions", body, "create-1")
		if first.status != http.StatusCreated || first.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first create: %d %s", first.status, first.raw)
		}
		again := e.keyed(t, "POST", "/v1/promotions", body, "create-1")
		if again.status != http.StatusCreated || again.raw != first.raw ||
			again.header.Get("Location") != first.header.Get("Location") ||
			again.header.Get("Content-Type") != "application/json" ||
			again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: %d %v %s\nfirst: %s", again.status, again.header, again.raw, first.raw)
		}
		if n := e.promotionCount(t); n != 1 {
			t.Fatalf("%d promotions after a retried create, want 1", n)
		}

		for name, r := range map[string]response{
			"other body": e.keyed(t, "POST", "/v1/promotions", `{"stock":6,"name":"keyed"}`, "create-1"),
			"other path": e.keyed(t, "POST", "/v1/promotions/"+first.body["id"].(string)+"/close", "", "create-1"),
		} {
			if r.status != http.StatusUnprocessableEntity || r.code() != "idempotency_key_reused" {
				t.Fatalf("%s with a used key: %d %s, want 422 idempotency_key_reused", name, r.status, r.raw)
			}
		}
		for name, key := range map[string]string{
			"empty":     "",
			"too long":  strings.Repeat("k", 65),
			"non-ASCII": "clé",
		} {
			r := e.keyed(t, "POST", "/v1/promotions", `{"stock":5}`, key)
			if r.status != http.StatusBadRequest || r.code() != "invalid_request" || r.body["field"] != "Idempotency-Key" {
				t.Fatalf("%s key: %d %s, want 400 invalid_request", name, r.status, r.raw)
			}
		}
		if n := e.promotionCount(t); n != 1 {
			t.Fatalf("%d promotions after refused requests, want 1", n)
		}

		// A kept 4xx is replayed too: the answer is the first one's.
		id := first.body["id"].(string)
		dup := `{"id":"` + id + `","stock":5}`
		if r := e.keyed(t, "POST", "/v1/promotions", dup, "dup-1"); r.status != http.StatusConflict || r.code() != "already_exists" {
			t.Fatalf("duplicate id: %d %s", r.status, r.raw)
		}
		if r := e.keyed(t, "POST", "/v1/promotions", dup, "dup-1"); r.code() != "already_exists" || r.header.Get("Idempotent-Replayed") != "true" ||
			r.header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("duplicate id again: %d %v %s", r.status, r.header, r.raw)
		}

		// Close and the other admin POSTs take keys the same way.
		closed := e.keyed(t, "POST", "/v1/promotions/"+id+"/close", "", "close-1")
		if closed.status != http.StatusOK {
			t.Fatalf("close: %d %s", closed.status, closed.raw)
		}
		if r := e.keyed(t, "POST", "/v1/promotions/"+id+"/close", "", "close-1"); r.raw != closed.raw || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("close again: %d %s", r.status, r.raw)
		}
		e.create(t, `{"id":"gk","mode":"grant"}`)
		g := e.keyed(t, "POST", "/v1/promotions/gk/grants", `{"user_ids":["a","b"]}`, "grant-1")
		if g.status != http.StatusAccepted || g.body["enqueued"] != float64(2) {
			t.Fatalf("grant: %d %s", g.status, g.raw)
		}
		if r := e.keyed(t, "POST", "/v1/promotions/gk/grants", `{"user_ids":["a","b"]}`, "grant-1"); r.raw != g.raw || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("grant again: %d %s (a second run reports duplicates)", r.status, r.raw)
		}
		if r := e.keyed(t, "POST", "/v1/promotions/gk/dead-letters/replay", `{"all":true}`, "replay-1"); r.status != http.StatusAccepted {
			t.Fatalf("replay: %d %s", r.status, r.raw)
		}
		if r := e.keyed(t, "POST", "/v1/promotions/gk/dead-letters/void", `{"claim_ids":["gk@a"]}`, "void-1"); r.status != http.StatusOK {
			t.Fatalf("void: %d %s", r.status, r.raw)
		}
		if r := e.keyed(t, "POST", "/v1/promotions/gk/dead-letters/void", `{"claim_ids":["gk@a"]}`, "void-1"); r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("void again: %d %s", r.status, r.raw)
		}
	})
}

// TestAdminIdempotencyInProgress: while the first request with a key runs,
// a retry gets 409 request_in_progress with Retry-After; afterwards it gets
// the first answer.
func TestAdminIdempotencyInProgress(t *testing.T) {
	t.Parallel()
	e := setup(t, single)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	httpapi.SetKeyedHook(e.api, func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	})
	const body = `{"id":"held","stock":3}`
	firstc := make(chan response, 1)
	go func() { firstc <- e.keyed(t, "POST", "/v1/promotions", body, "held-1") }()
	<-entered
	r := e.keyed(t, "POST", "/v1/promotions", body, "held-1")
	if r.status != http.StatusConflict || r.code() != "request_in_progress" || r.header.Get("Retry-After") == "" {
		close(release)
		t.Fatalf("retry while the first runs: %d %s, want 409 request_in_progress with Retry-After", r.status, r.raw)
	}
	close(release)
	first := <-firstc
	if first.status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.status, first.raw)
	}
	if r := e.keyed(t, "POST", "/v1/promotions", body, "held-1"); r.status != http.StatusCreated || r.raw != first.raw {
		t.Fatalf("retry after the first: %d %s", r.status, r.raw)
	}
}

// TestAdminIdempotencyKeeps5xxOut: an answer of 500 or above is not kept, so
// a retry with the same key runs again.
func TestAdminIdempotencyKeeps5xxOut(t *testing.T) {
	t.Parallel()
	e := setup(t, single)
	if err := e.store.Close(); err != nil { // the database is gone
		t.Fatal(err)
	}
	const body = `{"id":"nodb","stock":3}`
	for i := range 2 {
		r := e.keyed(t, "POST", "/v1/promotions", body, "nodb-1")
		if r.status != http.StatusServiceUnavailable || r.code() != "unavailable" || r.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("try %d without a database: %d %v %s, want a fresh 503 unavailable", i, r.status, r.header, r.raw)
		}
		err := e.client.Do(context.Background(), e.client.B().Get().Key(e.prefix+"admin-idem:nodb-1").Build()).Error()
		if !rueidis.IsRedisNil(err) {
			t.Fatalf("try %d: the 503 left a record (%v)", i, err)
		}
	}
}
