package promotion_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/stream"
)

// TestSkewedClockNeverDrainsEarly: whether a promotion has ended is decided
// by Redis TIME, the clock its claims are checked against. An instance whose
// clock runs 5 s ahead re-checks a promotion it believes ended: it is not
// drained while Redis still takes claims, and a claim accepted then is
// issued before the promotion drains. One running 5 s behind changes
// nothing either.
func TestSkewedClockNeverDrainsEarly(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{5 * time.Second, -5 * time.Second} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", "sqlite")
			ctx := context.Background()
			// Only an instance with no pool of the promotion running drains
			// it, and either may have started one for the claim: they stop
			// once idle well inside the wait below.
			idle := func(sc *stream.Config) { sc.IdleTimeout = 500 * time.Millisecond }
			real := w.manager(t, "real", idle)
			rechecks := make(chan string, 64)
			sc := fastStream()
			idle(&sc)
			skewed, err := promotion.New(w.client, w.st, promotion.Config{
				Prefix: w.prefix, Instance: "skewed", Stream: sc,
				RecheckInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
				// Re-checked every time, idle or not.
				IdleRecheckInterval: 50 * time.Millisecond,
				Now:                 func() time.Time { return time.Now().Add(skew) },
				OnBacklog: func(id string, _ int64) {
					select {
					case rechecks <- id:
					default:
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := skewed.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = skewed.Stop(ctx)
			})
			create(t, real, promotion.Promotion{ID: "skew", Stock: 10, EndsAt: time.Now().Add(3 * time.Second)})

			deadline := time.After(30 * time.Second)
			for seen := 0; seen < 3; {
				select {
				case id := <-rechecks:
					if id == "skew" {
						seen++
					}
				case <-deadline:
					t.Fatal("timed out waiting for the skewed instance's re-checks")
				}
			}
			if p, err := w.st.GetPromotion(ctx, "skew"); err != nil || p.Drained {
				t.Fatalf("promotion drained while Redis still takes claims: %+v %v", p, err)
			}
			if _, err := real.Claim(ctx, "skew", "u1", ""); err != nil {
				t.Fatalf("claim before the end: %v", err)
			}
			wait.For(t, 30*time.Second, "the promotion to drain with its claim issued", func() bool {
				p, err := w.st.GetPromotion(ctx, "skew")
				c, cerr := w.st.Counts(ctx, "skew")
				return err == nil && cerr == nil && p.Drained && c.Issued == 1
			})
		})
	}
}
