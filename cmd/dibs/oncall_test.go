package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/client"
)

// TestPromoPauseResumeSet: an operator pauses a promotion (claims answer
// paused), resumes it, and changes its stock and end; a change the server
// refuses exits 1 naming the code and the request.
func TestPromoPauseResumeSet(t *testing.T) {
	t.Parallel()
	srv, c := opsServer(t)
	ctx := t.Context()
	var p client.Promotion
	opsJSON(t, srv, &p, "promo", "create", "--id", "ps", "--stock", "3")

	opsJSON(t, srv, &p, "promo", "pause", "ps")
	if !p.Paused {
		t.Fatalf("paused: %+v", p)
	}
	if _, err := c.Claim(ctx, "ps", "u1"); !client.IsProblem(err, client.CodePaused) {
		t.Fatalf("claim on a paused promotion: %v", err)
	}
	if r := ops(t, srv, 0, "promo", "show", "ps"); !strings.Contains(r.stdout, "(paused)") {
		t.Errorf("show of a paused promotion:\n%s", r)
	}
	opsJSON(t, srv, &p, "promo", "resume", "ps")
	if p.Paused {
		t.Fatalf("resumed: %+v", p)
	}
	for _, u := range []string{"u1", "u2"} {
		if _, err := c.Claim(ctx, "ps", u); err != nil {
			t.Fatal(err)
		}
	}

	ends := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	opsJSON(t, srv, &p, "promo", "set", "ps", "--stock", "10", "--ends-at", ends.Format(time.RFC3339), "--idempotency-key", "set-1")
	if p.Stock != 10 || !p.EndsAt.Equal(ends) {
		t.Fatalf("set: stock %d, ends %v; want 10, %v", p.Stock, p.EndsAt, ends)
	}
	opsJSON(t, srv, &p, "promo", "set", "--stock", "4", "ps")
	if p.Stock != 4 || !p.EndsAt.Equal(ends) {
		t.Fatalf("set of the stock alone: stock %d, ends %v", p.Stock, p.EndsAt)
	}
	r := ops(t, srv, 1, "promo", "set", "ps", "--stock", "1")
	wantProblemLine(t, r, client.CodeStockBelowAccepted)
	if !strings.Contains(r.stderr, "(request_id ") {
		t.Errorf("the error line names no request: %s", r.stderr)
	}
	wantProblemLine(t, ops(t, srv, 1, "promo", "pause", "nope"), client.CodeNotFound)
	if r := ops(t, srv, 2, "promo", "set", "ps"); !strings.Contains(r.stderr, "nothing to change") {
		t.Errorf("set without a change:\n%s", r)
	}
	if r := ops(t, srv, 2, "promo", "set", "ps", "--ends-at", "soon"); !strings.Contains(r.stderr, "--ends-at: want an RFC 3339 time") {
		t.Errorf("set with a bad time:\n%s", r)
	}
	// The waiting room's levers.
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: "pw", Stock: 5,
		WaitingRoom: &client.WaitingRoomSettings{Enabled: true}}); err != nil {
		t.Fatal(err)
	}
	opsJSON(t, srv, &p, "promo", "set", "pw", "--admit-per-second", "40", "--max-active", "3", "--message", "Ten left")
	if w := p.WaitingRoom; w.AdmitPerSecond != 40 || w.MaxActive != 3 || w.Message != "Ten left" {
		t.Fatalf("set of the levers: %+v", w)
	}
	p = client.Promotion{}
	opsJSON(t, srv, &p, "promo", "set", "pw", "--message", "")
	if w := p.WaitingRoom; w.Message != "" || w.MaxActive != 3 {
		t.Fatalf("message cleared: %+v", w)
	}
}

// TestUserCommand: dibs user lists a user's claims in every promotion
// where it has any, with its points; --all lists the others too.
func TestUserCommand(t *testing.T) {
	t.Parallel()
	srv, c := opsServer(t)
	ctx := t.Context()
	for _, id := range []string{"pa", "pb", "pc"} {
		if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: id, Stock: 5, Kind: "point", Value: 7}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"pa", "pc"} {
		if _, err := c.Claim(ctx, id, "alice"); err != nil {
			t.Fatal(err)
		}
		waitIssued(t, c, id)
	}

	var rep userReport
	opsJSON(t, srv, &rep, "user", "alice")
	if rep.UserID != "alice" || rep.Read != 3 || len(rep.Promotions) != 2 || rep.Balance == nil || rep.Balance.Balance != 14 {
		t.Fatalf("report %+v", rep)
	}
	for i, id := range []string{"pa", "pc"} {
		s := rep.Promotions[i]
		if s.PromotionID != id || s.Status != client.StatusIssued || len(s.Claims) != 1 || s.Claims[0].ClaimID != id+"#1" {
			t.Errorf("standing %d: %+v", i, s)
		}
	}
	opsJSON(t, srv, &rep, "user", "alice", "--all")
	if len(rep.Promotions) != 3 || rep.Promotions[1].PromotionID != "pb" || rep.Promotions[1].Status != client.StatusNone {
		t.Errorf("--all: %+v", rep.Promotions)
	}
	r := ops(t, srv, 0, "user", "alice")
	for _, want := range []string{"user alice: points 14", "claims in 2 of 3 promotions read", "PROMOTION", "pa#1", "pc#1", "issued"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r)
		}
	}
	if r := ops(t, srv, 0, "user", "bob"); !strings.Contains(r.stdout, "claims in 0 of 3 promotions read") || strings.Contains(r.stdout, "PROMOTION") {
		t.Errorf("a user with no claims:\n%s", r)
	}
	wantProblemLine(t, ops(t, srv, 1, "user", "bad user"), client.CodeInvalidRequest)
	ops(t, srv, 2, "user")
}
