package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
)

// TestClaimWhileRebuildingIs503: a claim on a rebuilding promotion gets 503
// unavailable with Retry-After and takes nothing; once the rebuild ends,
// the same user's claim is accepted with the first rank.
func TestClaimWhileRebuildingIs503(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.create(t, `{"id":"rebuilding","stock":5}`)
		p, err := e.store.GetPromotion(ctx, "rebuilding")
		if err != nil {
			t.Fatal(err)
		}
		hold, err := e.mgr.Gate().BeginRebuild(ctx, claim.Promotion{ID: p.ID, Stock: p.Stock, PerUserLimit: p.PerUserLimit,
			StartsAt: p.StartsAt, EndsAt: p.EndsAt}, "test", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		r := e.claim(t, "rebuilding", "u1")
		if r.status != http.StatusServiceUnavailable || r.code() != "unavailable" || r.header.Get("Retry-After") == "" {
			t.Fatalf("claim while rebuilding: %d %s (Retry-After %q), want 503 unavailable with Retry-After",
				r.status, r.raw, r.header.Get("Retry-After"))
		}
		if _, err := hold.Resume(ctx, 0); err != nil {
			t.Fatal(err)
		}
		r = e.claim(t, "rebuilding", "u1")
		if r.status != http.StatusAccepted || r.body["rank"] != float64(1) {
			t.Fatalf("claim after resume: %d %s, want 202 with rank 1", r.status, r.raw)
		}
	})
}

// TestRequestedRebuild: an admin's rebuild answers what it did; one asked
// while another rebuild holds the promotion gets 409 rebuild_in_progress
// with Retry-After and changes nothing; it needs the admin token and a
// known promotion.
func TestRequestedRebuild(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.create(t, `{"id":"rb","stock":5}`)
		for _, u := range []string{"u1", "u2"} {
			if r := e.claim(t, "rb", u); r.status != http.StatusAccepted {
				t.Fatalf("claim of %s: %d %s", u, r.status, r.raw)
			}
		}
		e.waitIssued(t, "rb", 2)

		if r := e.do(t, "POST", "/v1/promotions/rb/rebuild", ""); r.status != http.StatusUnauthorized {
			t.Fatalf("without the token: %d %s, want 401", r.status, r.raw)
		}
		if r := e.admin(t, "POST", "/v1/promotions/nope/rebuild", ""); r.status != http.StatusNotFound || r.code() != "not_found" {
			t.Fatalf("unknown promotion: %d %s, want 404 not_found", r.status, r.raw)
		}

		p, err := e.store.GetPromotion(ctx, "rb")
		if err != nil {
			t.Fatal(err)
		}
		hold, err := e.mgr.Gate().BeginRebuild(ctx, claim.Promotion{ID: p.ID, Stock: p.Stock, PerUserLimit: p.PerUserLimit,
			StartsAt: p.StartsAt, EndsAt: p.EndsAt}, "other", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		r := e.admin(t, "POST", "/v1/promotions/rb/rebuild", "")
		if r.status != http.StatusConflict || r.code() != "rebuild_in_progress" || r.header.Get("Retry-After") == "" {
			t.Fatalf("while another rebuild holds it: %d %s, want 409 rebuild_in_progress with Retry-After", r.status, r.raw)
		}
		if _, err := hold.Resume(ctx, 0); err != nil {
			t.Fatal(err)
		}

		r = e.admin(t, "POST", "/v1/promotions/rb/rebuild", "")
		if r.status != http.StatusOK || r.body["claims"] != float64(2) || r.body["seq"] != float64(2) || r.body["promotion_id"] != "rb" {
			t.Fatalf("rebuild: %d %s, want 200 with 2 claims and seq 2", r.status, r.raw)
		}
		if r := e.claim(t, "rb", "u3"); r.status != http.StatusAccepted || r.body["rank"] != float64(3) {
			t.Fatalf("claim after the rebuild: %d %s, want 202 with rank 3", r.status, r.raw)
		}
	})
}
