package promotion_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

// hookPartner is a partner's coupon service that can be down: while down
// it answers 503 to everything; while up it makes one effect per
// Idempotency-Key (200 with a code the first time, 409 after).
type hookPartner struct {
	down      atomic.Bool
	downCalls atomic.Int64
	mu        sync.Mutex
	effects   map[string]int // Idempotency-Key → effects made
	bodies    map[string]string
}

func (p *hookPartner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if p.down.Load() {
		p.downCalls.Add(1)
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	p.mu.Lock()
	first := p.effects[key] == 0
	if first {
		p.effects[key]++
		raw, _ := json.Marshal(body)
		p.bodies[key] = string(raw)
	}
	p.mu.Unlock()
	if !first {
		http.Error(w, "seen", http.StatusConflict)
		return
	}
	fmt.Fprintf(w, `{"code":"W-%s"}`, key)
}

func (p *hookPartner) effect(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.effects[key]
}

// TestWebhookEndpointDown runs a webhook promotion through the whole
// pipeline while its endpoint answers 503 for a while: the accepted claims
// stay pending however often they are tried (many more times than
// max_deliveries), none is dead-lettered, and once the endpoint is back
// each is issued once, with one effect at the endpoint and its code. A
// claim revoked while the endpoint is down is revoked at once, its undo
// left pending, and the sweep posts the undo, once, when the endpoint is
// back.
func TestWebhookEndpointDown(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			partner := &hookPartner{effects: map[string]int{}, bodies: map[string]string{}}
			partner.down.Store(true)
			srv := httptest.NewServer(partner)
			t.Cleanup(srv.Close)
			wh, err := issue.NewWebhook("0123456789abcdef-pipeline", issue.WebhookConfig{
				TimeoutMS: 2000, BaseBackoffMS: 10, MaxBackoffMS: 50}, srv.Client(), nil)
			if err != nil {
				t.Fatal(err)
			}
			sc := fastStream()
			sc.MaxDeliveries = 2
			m := w.start(t, promotion.Config{
				Prefix: w.prefix, Instance: "a", Stream: sc,
				RecheckInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
				Issuers: issue.Kinds{store.KindWebhook: wh},
			})
			ctx := context.Background()
			const id, users = "hook", 5
			create(t, m, promotion.Promotion{ID: id, Stock: 10, Kind: promotion.KindWebhook, Value: 300,
				WebhookURL: srv.URL + "/issue"})
			for i := range users {
				if _, err := m.Claim(ctx, id, fmt.Sprintf("u%d", i+1), ""); err != nil {
					t.Fatal(err)
				}
			}

			// Down: tried again and again, never dead-lettered.
			wait.For(t, 60*time.Second, "the endpoint called 20 times while down", func() bool {
				return partner.downCalls.Load() >= 20
			})
			v, err := m.Get(ctx, id)
			if err != nil || v.Counts.Pending != users || v.Counts.Issued != 0 || v.Counts.Failed != 0 {
				t.Fatalf("while the endpoint is down: %+v, %v; want %d pending", v.Counts, err, users)
			}
			if dls, err := m.DeadLetters(ctx, id, "", 10); err != nil || len(dls) != 0 {
				t.Fatalf("dead letters while the endpoint is down: %+v, %v", dls, err)
			}

			// Back: each claim issued once, one effect each.
			partner.down.Store(false)
			waitCounts(t, m, id, users, 0)
			for i := range users {
				key := fmt.Sprintf("%s#%d", id, i+1)
				if n := partner.effect(key); n != 1 {
					t.Errorf("claim %s: %d effects at the endpoint, want 1", key, n)
				}
			}
			cs, err := m.UserClaims(ctx, id, "u1")
			if err != nil || len(cs) != 1 || cs[0].Status != promotion.StatusIssued ||
				cs[0].Grant.Code != "W-"+cs[0].ClaimID || cs[0].Grant.Value != 300 {
				t.Fatalf("u1's claim: %+v, %v; want issued with the partner's code", cs, err)
			}

			// A revoke while the endpoint is down: decided at once, its undo
			// pending until the sweep gets it through.
			partner.down.Store(true)
			before := partner.downCalls.Load()
			cid := cs[0].ClaimID
			res, err := m.Revoke(ctx, id, []string{cid})
			if err != nil || res.Revoked != 1 || !slices.Equal(res.Pending, []string{cid}) {
				t.Fatalf("revoke while the endpoint is down: %+v, %v; want revoked, its undo pending", res, err)
			}
			wait.For(t, 60*time.Second, "the sweep tries the undo again", func() bool {
				return partner.downCalls.Load() >= before+3
			})
			if un, err := w.st.ListUnappliedRevokes(ctx, time.Now().Add(time.Hour), 10); err != nil || len(un) != 1 {
				t.Fatalf("unapplied revokes while the endpoint is down: %+v, %v; want the one", un, err)
			}
			partner.down.Store(false)
			wait.For(t, 60*time.Second, "the revoke applied", func() bool {
				un, err := w.st.ListUnappliedRevokes(ctx, time.Now().Add(time.Hour), 10)
				return err == nil && len(un) == 0
			})
			rkey := cid + issue.RevokeIdempotencySuffix
			if n := partner.effect(rkey); n != 1 {
				t.Errorf("revoke of %s: %d effects at the endpoint, want 1", cid, n)
			}
			partner.mu.Lock()
			body := partner.bodies[rkey]
			partner.mu.Unlock()
			var got issue.WebhookRevoke
			if err := json.Unmarshal([]byte(body), &got); err != nil || got.Action != "revoke" || got.ClaimID != cid ||
				got.UserID != "u1" || got.Code != "W-"+cid {
				t.Errorf("revoke body %s (%v): want the action, the claim, its user and code", body, err)
			}
			if cs, err := m.UserClaims(ctx, id, "u1"); err != nil || len(cs) != 1 || cs[0].Status != promotion.StatusRevoked {
				t.Errorf("u1's claim after the revoke: %+v, %v", cs, err)
			}
			evs, err := w.st.Events(ctx, 0, []string{store.EventClaimRevoked}, 10)
			if err != nil || len(evs) != 1 || evs[0].ClaimID != cid {
				t.Errorf("claim.revoked events: %+v, %v; want one of %s", evs, err, cid)
			}
		})
	}
}

// TestWebhookRevokeRefused revokes a webhook claim whose partner refuses
// the revoke with 400: the claim is revoked in dibs, the refusal is
// reported with the partner's answer, the revoke is recorded as applied
// and never posted again, however many sweeps run.
func TestWebhookRevokeRefused(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			var revokes atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.Header.Get("Idempotency-Key"), issue.RevokeIdempotencySuffix) {
					revokes.Add(1)
					http.Error(rw, `{"error":"coupon already redeemed"}`, http.StatusBadRequest)
					return
				}
				fmt.Fprintf(rw, `{"code":"W-%s"}`, r.Header.Get("Idempotency-Key"))
			}))
			t.Cleanup(srv.Close)
			wh, err := issue.NewWebhook("0123456789abcdef-refused", issue.WebhookConfig{
				TimeoutMS: 2000, BaseBackoffMS: 10, MaxBackoffMS: 50}, srv.Client(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var sweeps atomic.Int64
			m := w.start(t, promotion.Config{
				Prefix: w.prefix, Instance: "a", Stream: fastStream(),
				RecheckInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
				Issuers: issue.Kinds{store.KindWebhook: wh},
			})
			promotion.AfterRecheck(m, func() { sweeps.Add(1) })
			ctx := context.Background()
			const id = "refused"
			create(t, m, promotion.Promotion{ID: id, Stock: 5, Kind: promotion.KindWebhook, Value: 1,
				WebhookURL: srv.URL + "/issue"})
			c, err := m.Claim(ctx, id, "u1", "")
			if err != nil {
				t.Fatal(err)
			}
			waitCounts(t, m, id, 1, 0)
			res, err := m.Revoke(ctx, id, []string{c.ClaimID})
			if err != nil || res.Revoked != 1 || len(res.Pending) != 0 || len(res.Refused) != 1 ||
				res.Refused[0].ClaimID != c.ClaimID || !strings.Contains(res.Refused[0].Reason, "400") ||
				!strings.Contains(res.Refused[0].Reason, "already redeemed") {
				t.Fatalf("revoke refused by the partner: %+v, %v; want revoked, refused with the answer", res, err)
			}
			if un, err := w.st.ListUnappliedRevokes(ctx, time.Now().Add(time.Hour), 10); err != nil || len(un) != 0 {
				t.Fatalf("unapplied revokes after a refusal: %+v, %v; want none", un, err)
			}
			if cs, err := m.UserClaims(ctx, id, "u1"); err != nil || len(cs) != 1 || cs[0].Status != promotion.StatusRevoked {
				t.Fatalf("u1's claim after a refused revoke: %+v, %v", cs, err)
			}
			from := sweeps.Load()
			wait.For(t, 30*time.Second, "several re-checks", func() bool { return sweeps.Load() >= from+20 })
			if n := revokes.Load(); n != 1 {
				t.Fatalf("the refused revoke was posted %d times, want 1", n)
			}
		})
	}
}
