package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
)

// TestClaimWhileRebuildingIs503: a claim on a promotion paused for a
// rebuild gets 503 unavailable with Retry-After and takes nothing; once
// resumed, the same user's claim is accepted with the first rank.
func TestClaimWhileRebuildingIs503(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.create(t, `{"id":"paused","stock":5}`)
		p, err := e.store.GetPromotion(ctx, "paused")
		if err != nil {
			t.Fatal(err)
		}
		hold, err := e.mgr.Gate().Pause(ctx, claim.Promotion{ID: p.ID, Stock: p.Stock, PerUserLimit: p.PerUserLimit,
			StartsAt: p.StartsAt, EndsAt: p.EndsAt}, "test", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		r := e.claim(t, "paused", "u1")
		if r.status != http.StatusServiceUnavailable || r.code() != "unavailable" || r.header.Get("Retry-After") == "" {
			t.Fatalf("claim while paused: %d %s (Retry-After %q), want 503 unavailable with Retry-After",
				r.status, r.raw, r.header.Get("Retry-After"))
		}
		if _, err := hold.Resume(ctx, 0); err != nil {
			t.Fatal(err)
		}
		r = e.claim(t, "paused", "u1")
		if r.status != http.StatusAccepted || r.body["rank"] != float64(1) {
			t.Fatalf("claim after resume: %d %s, want 202 with rank 1", r.status, r.raw)
		}
	})
}
