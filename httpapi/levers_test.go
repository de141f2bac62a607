package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/waitroom"
)

// TestRoomLevers: PATCH changes a running waiting room's rate, cap on live
// passes and message; the message reaches the status answer, the join and
// the event stream; bad values and promotions without a room are refused
// with the field at fault.
func TestRoomLevers(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			e := watched(t, b, nil)
			e.roomed(t, "wr", 10)
			e.create(t, `{"id":"plain","stock":10}`)
			e.join(t, "wr", "u1")
			s, _ := e.openEvents(t, "wr", "u1")
			if ev := s.until(t, "waiting"); ev.data["message"] != nil {
				t.Fatalf("first event before any message: %s", ev.raw)
			}

			r := e.admin(t, "PATCH", "/v1/promotions/wr",
				`{"waiting_room":{"admit_per_second":500,"max_active":3,"message":"Ten left — hold on"}}`)
			room, _ := r.body["waiting_room"].(map[string]any)
			if r.status != http.StatusOK || room["admit_per_second"] != float64(500) || room["max_active"] != float64(3) ||
				room["message"] != "Ten left — hold on" {
				t.Fatalf("PATCH of the levers: %d %s", r.status, r.raw)
			}
			for {
				ev := s.until(t, "waiting")
				if ev.data["message"] == "Ten left — hold on" {
					break
				}
			}
			// A lookup is answered from the room's latest read, at most a
			// tick old: it shows the message by the next read at the latest.
			wait.For(t, 10*time.Second, "the message in the user's standing", func() bool {
				return e.standing(t, "wr", "u1").body["message"] == "Ten left — hold on"
			})
			if r := e.join(t, "wr", "u2"); r.status != http.StatusAccepted || r.body["message"] != "Ten left — hold on" {
				t.Fatalf("join after the message: %d %s", r.status, r.raw)
			}
			// The cap binds admission at once: of the five waiting, three
			// are let in.
			for _, u := range []string{"u3", "u4", "u5"} {
				e.join(t, "wr", u)
			}
			if res := e.tickLater(t, "wr"); res.Admitted != 3 || res.Live != 3 {
				t.Fatalf("tick under a cap of 3: %+v", res)
			}
			if r := e.admin(t, "PATCH", "/v1/promotions/wr", `{"waiting_room":{"message":""}}`); r.status != http.StatusOK {
				t.Fatalf("clear the message: %d %s", r.status, r.raw)
			}
			if r := e.standing(t, "wr", "u5"); r.body["message"] != nil {
				t.Fatalf("standing after clearing the message: %s", r.raw)
			}

			for _, c := range []struct{ id, body, field string }{
				{"plain", `{"waiting_room":{"message":"hi"}}`, "waiting_room"},
				{"wr", `{"waiting_room":{"admit_per_second":0}}`, "waiting_room.admit_per_second"},
				{"wr", `{"waiting_room":{"admit_per_second":1000001}}`, "waiting_room.admit_per_second"},
				{"wr", `{"waiting_room":{"max_active":-1}}`, "waiting_room.max_active"},
				{"wr", `{"waiting_room":{"pow_difficulty":25}}`, "waiting_room.pow_difficulty"},
				{"wr", fmt.Sprintf(`{"waiting_room":{"message":%q}}`, strings.Repeat("x", 281)), "waiting_room.message"},
				{"wr", `{"waiting_room":{"message":"two\nlines"}}`, "waiting_room.message"},
			} {
				r := e.admin(t, "PATCH", "/v1/promotions/"+c.id, c.body)
				if r.status != http.StatusBadRequest || r.code() != "invalid_request" || r.body["field"] != c.field {
					t.Errorf("PATCH %s %s: %d %s, want 400 naming %s", c.id, c.body, r.status, r.raw, c.field)
				}
			}
			if r := e.admin(t, "PATCH", "/v1/promotions/wr", `{"waiting_room":{"entry_ttl_seconds":5}}`); r.status != http.StatusBadRequest {
				t.Errorf("PATCH of a setting that is no lever: %d %s", r.status, r.raw)
			}
			if r := e.admin(t, "POST", "/v1/promotions", `{"id":"bad","stock":1,"waiting_room":{"max_active":5}}`); r.status != http.StatusBadRequest ||
				r.body["field"] != "waiting_room.max_active" {
				t.Errorf("create with a cap and no room: %d %s", r.status, r.raw)
			}
			if r := e.do(t, "GET", "/v1/promotions/wr", ""); !strings.Contains(r.raw, `"max_active":3`) ||
				!strings.Contains(r.raw, `"admit_per_second":500`) || strings.Contains(r.raw, `"message"`) {
				t.Fatalf("promotion after the changes: %s", r.raw)
			}
		})
	}
}

// joinSolved joins user to promo's queue with a solved challenge.
func (e *env) joinSolved(t *testing.T, promo, user, challenge, nonce string) response {
	t.Helper()
	return e.do(t, "POST", "/v1/promotions/"+promo+"/queue",
		fmt.Sprintf(`{"user_id":%q,"challenge":%q,"nonce":%q}`, user, challenge, nonce))
}

// challengeOf checks that r is challenge_required at difficulty and
// returns its challenge.
func challengeOf(t *testing.T, r response, difficulty int) string {
	t.Helper()
	ch, _ := r.body["challenge"].(string)
	exp, _ := r.body["challenge_expires_at"].(string)
	at, err := time.Parse(time.RFC3339Nano, exp)
	if r.status != http.StatusForbidden || r.code() != "challenge_required" || ch == "" ||
		r.body["difficulty"] != float64(difficulty) || err != nil || !at.After(time.Now()) {
		t.Fatalf("want challenge_required at %d: %d %s", difficulty, r.status, r.raw)
	}
	return ch
}

// TestJoinProofOfWork: a room with pow_difficulty answers a join without a
// solution 403 challenge_required with a fresh challenge; the solution
// found by the Go solver joins once; a reused, another user's or an
// easier one than the raised difficulty is refused; difficulty 0 turns
// it off. The status lookup never asks for one.
func TestJoinProofOfWork(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		start := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		e.create(t, fmt.Sprintf(`{"id":"pow","stock":10,"starts_at":%q,"waiting_room":{"enabled":true,"pow_difficulty":6}}`, start))
		ch := challengeOf(t, e.join(t, "pow", "u1"), 6)
		nonce, err := waitroom.Solve(context.Background(), ch, 6)
		if err != nil {
			t.Fatal(err)
		}
		if r := e.joinSolved(t, "pow", "u1", ch, nonce); r.status != http.StatusAccepted || r.body["position"] != float64(1) {
			t.Fatalf("join with the solution: %d %s", r.status, r.raw)
		}
		if r := e.standing(t, "pow", "u1"); r.status != http.StatusOK || r.body["status"] != "waiting" {
			t.Fatalf("standing: %d %s", r.status, r.raw)
		}
		fresh := challengeOf(t, e.joinSolved(t, "pow", "u1", ch, nonce), 6) // reused
		if fresh == ch {
			t.Fatal("the refusal handed out the spent challenge again")
		}
		challengeOf(t, e.joinSolved(t, "pow", "u2", ch, nonce), 6)     // another user's
		challengeOf(t, e.joinSolved(t, "pow", "u2", "forged", "1"), 6) // not one of ours

		ch2 := challengeOf(t, e.join(t, "pow", "u2"), 6)
		nonce2, _ := waitroom.Solve(context.Background(), ch2, 6)
		if r := e.admin(t, "PATCH", "/v1/promotions/pow", `{"waiting_room":{"pow_difficulty":8}}`); r.status != http.StatusOK {
			t.Fatalf("raise the difficulty: %d %s", r.status, r.raw)
		}
		ch3 := challengeOf(t, e.joinSolved(t, "pow", "u2", ch2, nonce2), 8) // too easy now
		nonce3, _ := waitroom.Solve(context.Background(), ch3, 8)
		if r := e.joinSolved(t, "pow", "u2", ch3, nonce3); r.status != http.StatusAccepted || r.body["position"] != float64(2) {
			t.Fatalf("join at the raised difficulty: %d %s", r.status, r.raw)
		}
		if r := e.admin(t, "PATCH", "/v1/promotions/pow", `{"waiting_room":{"pow_difficulty":0}}`); r.status != http.StatusOK {
			t.Fatalf("turn it off: %d %s", r.status, r.raw)
		}
		if r := e.join(t, "pow", "u3"); r.status != http.StatusAccepted || r.body["position"] != float64(3) {
			t.Fatalf("join with the proof of work off: %d %s", r.status, r.raw)
		}
	})
}
