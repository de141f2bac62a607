package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/dibsio/dibs/waitroom"
)

// testRoomKeys sign the entry tokens of the test servers.
var testRoomKeys = []waitroom.Key{{ID: "t1", Secret: bytes.Repeat([]byte{9}, waitroom.MinSecretLen)}}

// join joins user to promo's queue.
func (e *env) join(t *testing.T, promo, user string) response {
	t.Helper()
	return e.do(t, "POST", "/v1/promotions/"+promo+"/queue", fmt.Sprintf(`{"user_id":%q}`, user))
}

// standing reads user's standing in promo's queue.
func (e *env) standing(t *testing.T, promo, user string) response {
	t.Helper()
	return e.do(t, "GET", "/v1/promotions/"+promo+"/queue/"+user, "")
}

// tick advances admission in promo's room once, as the scheduler does.
func (e *env) tick(t *testing.T, promo string) waitroom.TickResult {
	t.Helper()
	res, err := e.mgr.Rooms().Tick(context.Background(), promo)
	if err != nil {
		t.Fatalf("tick %s: %v", promo, err)
	}
	return res
}

// tickLater ticks promo's room as it would a second after its last tick:
// the room's opening time moves back by a second first, so the tick has a
// second's allowance however soon it follows the last (admission spends an
// allowance that grows with time and is capped at two ticks' worth).
func (e *env) tickLater(t *testing.T, promo string) waitroom.TickResult {
	t.Helper()
	meta := e.mgr.Rooms().Keys(promo).Meta()
	if err := e.client.Do(context.Background(), e.client.B().Hincrby().Key(meta).Field("open_ms").Increment(-1000).Build()).Error(); err != nil {
		t.Fatalf("move %s's opening back: %v", promo, err)
	}
	return e.tick(t, promo)
}

// roomed creates a first-come promotion with a waiting room and stock
// units that started an hour ago, so that admission is bounded by the
// stock alone.
func (e *env) roomed(t *testing.T, id string, stock int) {
	t.Helper()
	start := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	e.create(t, fmt.Sprintf(`{"id":%q,"stock":%d,"starts_at":%q,"waiting_room":{"enabled":true,"admit_per_second":1000,"entry_ttl_seconds":60}}`, id, stock, start))
}

// TestWaitingRoom: the queue end to end over HTTP, from joining to the
// pass spent by a claim and the line sold out.
func TestWaitingRoom(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		e.roomed(t, "wr", 2)

		// Joining hands out places in order; joining again keeps the place.
		for i, u := range []string{"u1", "u2", "u3"} {
			r := e.join(t, "wr", u)
			if r.status != http.StatusAccepted || r.body["status"] != "waiting" || r.body["position"] != float64(i+1) {
				t.Fatalf("join %s: %d %s", u, r.status, r.raw)
			}
		}
		if r := e.join(t, "wr", "u1"); r.status != http.StatusAccepted || r.body["position"] != float64(1) {
			t.Fatalf("join u1 again: %d %s", r.status, r.raw)
		}
		r := e.standing(t, "wr", "u2")
		rng, _ := r.body["estimated_wait_range_seconds"].([]any)
		if r.status != http.StatusOK || r.body["status"] != "waiting" || r.body["position"] != float64(2) ||
			len(rng) != 2 || r.body["stock_expected_to_last"] != true || r.body["poll_after_ms"] == nil ||
			r.body["estimated_wait_seconds"] == nil || r.body["entry_token"] != nil || r.body["paused"] != false {
			t.Fatalf("standing of u2: %d %s", r.status, r.raw)
		}
		// A paused promotion tells its waiting users so, and lets nobody in.
		if r := e.admin(t, "PATCH", "/v1/promotions/wr", `{"paused":true}`); r.status != http.StatusOK {
			t.Fatalf("pause: %d %s", r.status, r.raw)
		}
		if r := e.standing(t, "wr", "u2"); r.body["status"] != "waiting" || r.body["paused"] != true {
			t.Fatalf("standing of u2 while paused: %d %s", r.status, r.raw)
		}
		if res := e.tick(t, "wr"); res.Admitted != 0 || res.State != "paused" {
			t.Fatalf("tick while paused: %+v", res)
		}
		if r := e.admin(t, "PATCH", "/v1/promotions/wr", `{"paused":false}`); r.status != http.StatusOK {
			t.Fatalf("resume: %d %s", r.status, r.raw)
		}
		if r := e.standing(t, "wr", "u2"); r.body["paused"] != false {
			t.Fatalf("standing of u2 after the resume: %d %s", r.status, r.raw)
		}
		if r := e.standing(t, "wr", "nobody"); r.status != http.StatusNotFound || r.code() != "not_found" {
			t.Fatalf("standing of a user who never joined: %d %s", r.status, r.raw)
		}

		// Without a pass nobody claims.
		if r := e.claim(t, "wr", "u1"); r.status != http.StatusForbidden || r.code() != "not_admitted" {
			t.Fatalf("claim without a token: %d %s", r.status, r.raw)
		}

		// Admission lets in as many as the stock can serve: two of three.
		if res := e.tickLater(t, "wr"); res.Admitted != 2 || len(res.New) != 2 {
			t.Fatalf("tick: %+v", res)
		}
		tokens := map[string]string{}
		for _, u := range []string{"u1", "u2"} {
			r := e.standing(t, "wr", u)
			tok, _ := r.body["entry_token"].(string)
			if r.status != http.StatusOK || r.body["status"] != "admitted" || tok == "" || r.body["expires_at"] == nil {
				t.Fatalf("standing of admitted %s: %d %s", u, r.status, r.raw)
			}
			tokens[u] = tok
		}
		if r := e.standing(t, "wr", "u3"); r.body["status"] != "waiting" || r.body["position"] != float64(1) ||
			r.body["stock_expected_to_last"] != false {
			t.Fatalf("standing of u3: %d %s", r.status, r.raw)
		}

		// Forged and other users' tokens are refused, taking nothing.
		for name, hdr := range map[string]string{
			"forged":       "AAAA" + tokens["u1"][4:],
			"garbage":      "not-a-token",
			"another user": tokens["u2"],
		} {
			if r := e.claim(t, "wr", "u1", "X-Entry-Token", hdr); r.status != http.StatusForbidden || r.code() != "not_admitted" {
				t.Fatalf("claim with a %s token: %d %s", name, r.status, r.raw)
			}
		}

		// The pass claims once; a retry with its Idempotency-Key gets the
		// original answer, anything else not_admitted.
		first := e.claim(t, "wr", "u1", "X-Entry-Token", tokens["u1"], "Idempotency-Key", "k1")
		if first.status != http.StatusAccepted {
			t.Fatalf("claim with the pass: %d %s", first.status, first.raw)
		}
		if r := e.claim(t, "wr", "u1", "X-Entry-Token", tokens["u1"]); r.status != http.StatusForbidden || r.code() != "not_admitted" {
			t.Fatalf("second claim with the spent pass: %d %s", r.status, r.raw)
		}
		if r := e.claim(t, "wr", "u1", "X-Entry-Token", tokens["u1"], "Idempotency-Key", "k2"); r.status != http.StatusForbidden || r.code() != "not_admitted" {
			t.Fatalf("claim with the spent pass and a new key: %d %s", r.status, r.raw)
		}
		again := e.claim(t, "wr", "u1", "X-Entry-Token", tokens["u1"], "Idempotency-Key", "k1")
		if again.status != http.StatusAccepted || again.body["claim_id"] != first.body["claim_id"] ||
			again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry with the same key: %d %s (first %s)", again.status, again.raw, first.raw)
		}
		if r := e.standing(t, "wr", "u1"); r.body["status"] != "used" {
			t.Fatalf("standing of u1 after the claim: %s", r.raw)
		}

		// The counts show the room.
		pr := e.do(t, "GET", "/v1/promotions/wr", "")
		wr, _ := pr.body["waiting_room"].(map[string]any)
		if wr["enabled"] != true || wr["admitted"] != float64(2) || wr["passes_spent"] != float64(1) ||
			wr["waiting"] != float64(1) || wr["abandoned"] != float64(0) {
			t.Fatalf("promotion's waiting_room: %s", pr.raw)
		}

		// The last unit goes: the line is sold out for everyone waiting.
		if r := e.claim(t, "wr", "u2", "X-Entry-Token", tokens["u2"]); r.status != http.StatusAccepted {
			t.Fatalf("claim of u2: %d %s", r.status, r.raw)
		}
		if r := e.standing(t, "wr", "u3"); r.status != http.StatusOK || r.body["status"] != "sold_out" {
			t.Fatalf("standing of u3 once sold out: %d %s", r.status, r.raw)
		}
		if r := e.join(t, "wr", "u4"); r.status != http.StatusGone || r.code() != "sold_out" {
			t.Fatalf("join once sold out: %d %s", r.status, r.raw)
		}
	})
}

// TestWaitingRoomRefusals: what has no waiting room answers as before, and
// definitions that cannot have one are refused.
func TestWaitingRoomRefusals(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		e.create(t, `{"id":"plain","stock":5}`)
		if r := e.join(t, "plain", "u1"); r.status != http.StatusNotFound || r.code() != "not_found" {
			t.Fatalf("join without a room: %d %s", r.status, r.raw)
		}
		if r := e.claim(t, "plain", "u1", "X-Entry-Token", "whatever"); r.status != http.StatusAccepted {
			t.Fatalf("claim without a room, with a token: %d %s", r.status, r.raw)
		}
		if r := e.join(t, "nope", "u1"); r.status != http.StatusNotFound || r.code() != "not_found" {
			t.Fatalf("join of an unknown promotion: %d %s", r.status, r.raw)
		}
		r := e.admin(t, "POST", "/v1/promotions", `{"mode":"grant","waiting_room":{"enabled":true}}`)
		if r.status != http.StatusBadRequest || r.body["field"] != "waiting_room.enabled" {
			t.Fatalf("grant with a room: %d %s", r.status, r.raw)
		}
		e.roomed(t, "wr", 1)
		for name, body := range map[string]string{
			"no body":     ``,
			"bad user":    `{"user_id":"-x"}`,
			"no user":     `{}`,
			"not json":    `{`,
			"extra field": `{"user_id":"u1","x":1}`,
		} {
			r := e.do(t, "POST", "/v1/promotions/wr/queue", body)
			if r.status != http.StatusBadRequest || r.code() != "invalid_request" {
				t.Fatalf("join with %s: %d %s", name, r.status, r.raw)
			}
		}
		if r := e.do(t, "POST", "/v1/promotions/wr/close", ``, "Authorization", "Bearer "+token); r.status != http.StatusOK {
			t.Fatalf("close: %d %s", r.status, r.raw)
		}
		if r := e.join(t, "wr", "u1"); r.status != http.StatusForbidden || r.code() != "ended" {
			t.Fatalf("join once ended: %d %s", r.status, r.raw)
		}
	})
}

// TestWaitingRoomPerUserLimit: behind a waiting room each pass is one of
// the user's claims; a user whose pass was spent joins again at the back
// while below per_user_limit, and is answered used at it.
func TestWaitingRoomPerUserLimit(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		start := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		for _, limit := range []int{3, 1} {
			id := fmt.Sprintf("wr%d", limit)
			e.create(t, fmt.Sprintf(`{"id":%q,"stock":10,"per_user_limit":%d,"starts_at":%q,"waiting_room":{"enabled":true,"admit_per_second":1000,"entry_ttl_seconds":60}}`,
				id, limit, start))
			var last string
			for round := 1; round <= limit; round++ {
				if r := e.join(t, id, "u1"); r.status != http.StatusAccepted || r.body["status"] != "waiting" || r.body["position"] != float64(1) {
					t.Fatalf("limit %d, join %d: %d %s", limit, round, r.status, r.raw)
				}
				if res := e.tickLater(t, id); len(res.New) != 1 {
					t.Fatalf("limit %d, tick %d: %+v", limit, round, res)
				}
				r := e.join(t, id, "u1")
				last, _ = r.body["entry_token"].(string)
				if r.status != http.StatusOK || r.body["status"] != "admitted" || last == "" {
					t.Fatalf("limit %d, join %d once admitted: %d %s", limit, round, r.status, r.raw)
				}
				if r := e.claim(t, id, "u1", "X-Entry-Token", last); r.status != http.StatusAccepted {
					t.Fatalf("limit %d, claim %d: %d %s", limit, round, r.status, r.raw)
				}
			}
			// At the limit: used, and a claim is not admitted, with the
			// spent pass or without one.
			if r := e.join(t, id, "u1"); r.status != http.StatusOK || r.body["status"] != "used" || r.body["position"] != nil {
				t.Fatalf("limit %d, join at the limit: %d %s", limit, r.status, r.raw)
			}
			if r := e.standing(t, id, "u1"); r.status != http.StatusOK || r.body["status"] != "used" {
				t.Fatalf("limit %d, standing at the limit: %d %s", limit, r.status, r.raw)
			}
			for _, hdr := range [][]string{{"X-Entry-Token", last}, nil} {
				if r := e.claim(t, id, "u1", hdr...); r.status != http.StatusForbidden || r.code() != "not_admitted" {
					t.Fatalf("limit %d, claim at the limit (%v): %d %s", limit, hdr, r.status, r.raw)
				}
			}
			c := e.counts(t, id)
			if c["accepted"] != float64(limit) {
				t.Fatalf("limit %d: counts %v, want %d accepted", limit, c, limit)
			}
			pr := e.do(t, "GET", "/v1/promotions/"+id, "")
			wr, _ := pr.body["waiting_room"].(map[string]any)
			if wr["admitted"] != float64(limit) || wr["passes_spent"] != float64(limit) || wr["waiting"] != float64(0) {
				t.Fatalf("limit %d: waiting_room %s", limit, pr.raw)
			}
		}
	})
}
