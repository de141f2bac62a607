package promotion_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// TestCustomIssuer runs a library user's issuer in the pipeline: its
// grant is written with the issued row and shown in the user's claims; an
// outage it reports (stream.Transient) is retried until it answers; a
// refusal (stream.Permanent) dead-letters the claim; a redelivered claim
// keeps the grant written first, though the issuer answers another.
func TestCustomIssuer(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	custom := issue.IssuerFunc(func(_ context.Context, p store.Promotion, c store.Issue) (issue.Grant, error) {
		mu.Lock()
		calls[c.UserID]++
		n := calls[c.UserID]
		mu.Unlock()
		switch {
		case c.UserID == "flaky" && n == 1:
			return issue.Grant{}, stream.Transient(errors.New("partner unreachable"))
		case c.UserID == "refused":
			return issue.Grant{}, stream.Permanent(errors.New("partner refused the user"))
		}
		return issue.Grant{Code: fmt.Sprintf("C-%s-%d", c.UserID, n), Value: p.Value}, nil
	})
	m := w.start(t, promotion.Config{
		Prefix: w.prefix, Stream: fastStream(), RecheckInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Issuers: issue.Kinds{store.KindCoupon: custom},
	})
	ctx := t.Context()
	create(t, m, promotion.Promotion{ID: "custom", Kind: promotion.KindCoupon, Value: 300, Stock: 5})
	create(t, m, promotion.Promotion{ID: "pts", Mode: promotion.ModeGrant, Kind: promotion.KindPoint, Value: 9})
	var flaky promotion.Claimed
	for _, u := range []string{"ok", "flaky", "refused"} {
		res, err := m.Claim(ctx, "custom", u, "")
		if err != nil {
			t.Fatal(err)
		}
		if u == "flaky" {
			flaky = res
		}
	}
	waitCounts(t, m, "custom", 2, 1)

	grantOf := func(user string) store.Grant {
		t.Helper()
		cs, err := m.UserClaims(ctx, "custom", user)
		if err != nil || len(cs) != 1 {
			t.Fatalf("%s's claims: %+v, %v", user, cs, err)
		}
		return cs[0].Grant
	}
	if g := grantOf("ok"); g.Code != "C-ok-1" || g.Value != 300 {
		t.Fatalf("ok's grant %+v", g)
	}
	if g := grantOf("flaky"); g.Code != "C-flaky-2" {
		t.Fatalf("flaky's grant %+v, want the code of its second call", g)
	}
	if g := grantOf("refused"); g.Code != "" || g.Value != 0 {
		t.Fatalf("refused's grant %+v, want none", g)
	}

	// A redelivery of flaky's claim asks the issuer again (a third code)
	// and keeps the second.
	k := claim.KeysFor(w.prefix, "custom")
	entry := w.client.B().Xadd().Key(k.Stream()).Id("*").FieldValue().
		FieldValue("claim_id", flaky.ClaimID).FieldValue("user", "flaky").
		FieldValue("rank", fmt.Sprint(flaky.Rank)).FieldValue("slot", fmt.Sprint(flaky.Slot)).FieldValue("at", "1").Build()
	if err := w.client.Do(ctx, entry).Error(); err != nil {
		t.Fatal(err)
	}
	m.Registry().Wake("custom")
	wait.For(t, 30*time.Second, "the redelivery to be handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls["flaky"] == 3 && groupIdle(t, w, "custom")
	})
	if g := grantOf("flaky"); g.Code != "C-flaky-2" {
		t.Fatalf("flaky's grant after a redelivery %+v, want the first one written", g)
	}

	// The built-in point issuer still serves the kinds the map leaves out.
	if _, err := m.Grant(ctx, "pts", []string{"ok"}); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, m, "pts", 1, 0)
	if b, err := m.Balance(ctx, "ok"); err != nil || b.Points != 9 || b.Entries != 1 {
		t.Fatalf("ok's balance %+v, %v, want 9 in 1 entry", b, err)
	}
	var ve *promotion.ValidationError
	if _, err := m.Balance(ctx, "-bad"); !errors.As(err, &ve) || ve.Field != "user_id" {
		t.Fatalf("Balance(-bad) = %v, want a ValidationError naming user_id", err)
	}
}
