package promotion_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

// TestPromotionEvents: the loop writes promotion.opened, sold_out and
// ended once each, around the claims' own events, and two instances
// watching one promotion write each once.
func TestPromotionEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, "single", "sqlite")
	m := w.manager(t, "a", nil)
	w.manager(t, "b", nil)
	create(t, m, promotion.Promotion{ID: "ev", Stock: 2})
	for _, u := range []string{"u1", "u2"} {
		if _, err := m.Claim(ctx, "ev", u, ""); err != nil {
			t.Fatal(err)
		}
	}
	waitCounts(t, m, "ev", 2, 0)
	types := func() []string {
		evs, err := m.Events(ctx, 0, nil, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			if e.PromotionID != "ev" {
				t.Fatalf("event of promotion %s", e.PromotionID)
			}
			out = append(out, e.Type)
		}
		return out
	}
	count := func(ts []string, typ string) int {
		n := 0
		for _, x := range ts {
			if x == typ {
				n++
			}
		}
		return n
	}
	wait.For(t, 10*time.Second, "promotion.opened and sold_out", func() bool {
		ts := types()
		return count(ts, store.EventPromotionOpened) == 1 && count(ts, store.EventPromotionSoldOut) == 1
	})
	if _, err := m.Close(ctx, "ev"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "promotion.ended", func() bool {
		return count(types(), store.EventPromotionEnded) == 1
	})
	ts := types()
	for _, typ := range []string{store.EventPromotionOpened, store.EventPromotionSoldOut, store.EventPromotionEnded} {
		if count(ts, typ) != 1 {
			t.Fatalf("events %q: want one %s", ts, typ)
		}
	}
	if count(ts, store.EventClaimAccepted) != 2 || count(ts, store.EventClaimIssued) != 2 {
		t.Fatalf("events %q: want two claims accepted and issued", ts)
	}
	if i := slices.Index(ts, store.EventPromotionEnded); i != len(ts)-1 {
		t.Fatalf("events %q: ended is not the last", ts)
	}
}
