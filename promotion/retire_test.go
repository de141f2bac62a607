package promotion_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
)

// shiftClock is an injected clock: the wall clock moved forward by a
// shift the test sets.
type shiftClock struct{ shift atomic.Int64 }

func (c *shiftClock) now() time.Time          { return time.Now().Add(time.Duration(c.shift.Load())) }
func (c *shiftClock) advance(d time.Duration) { c.shift.Add(int64(d)) }

// redisKeys counts the promotion's claim-state keys Redis holds.
func redisKeys(t *testing.T, w world, id string) int64 {
	t.Helper()
	keys := claim.KeysFor(w.prefix, id).State()
	n, err := w.client.Do(context.Background(), w.client.B().Exists().Key(keys...).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rechecks returns a function that waits until the manager has run n more
// re-checks.
func rechecks(t *testing.T, m *promotion.Manager) func(n int) {
	var count atomic.Int64
	promotion.AfterRecheck(m, func() { count.Add(1) })
	return func(n int) {
		t.Helper()
		target := count.Load() + int64(n)
		wait.For(t, 30*time.Second, "re-checks", func() bool { return count.Load() >= target })
	}
}

// TestRetirement: a drained promotion keeps its Redis state for the
// retention, measured on the Manager's clock, then is retired: the database
// marks it, its Redis keys and stream are deleted. Afterwards it reads as
// before from the database, claims (with or without an Idempotency-Key)
// answer ErrEnded, and nothing — claims, reads, a close, replay, void,
// rebuild, another instance's start — makes its Redis state again. A
// retirement whose Redis step never ran (the instance died after marking
// the database) is finished by the next pass.
func TestRetirement(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			var clock shiftClock
			sc := fastStream()
			sc.IdleTimeout = 100 * time.Millisecond
			cfg := promotion.Config{Prefix: w.prefix, Instance: "a", Stream: sc,
				RecheckInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
				Retention: time.Hour, Now: clock.now}
			m := w.start(t, cfg)
			tick := rechecks(t, m)
			ctx := context.Background()
			create(t, m, promotion.Promotion{ID: "old", Stock: 5})
			create(t, m, promotion.Promotion{ID: "half", Stock: 5})
			for _, u := range []string{"u1", "u2"} {
				if _, err := m.Claim(ctx, "old", u, "k-"+u); err != nil {
					t.Fatal(err)
				}
			}
			before := waitCounts(t, m, "old", 2, 0)
			for _, id := range []string{"old", "half"} {
				if _, err := m.Close(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			wait.For(t, 30*time.Second, "both promotions drained", func() bool {
				a, err1 := w.st.GetPromotion(ctx, "old")
				b, err2 := w.st.GetPromotion(ctx, "half")
				return err1 == nil && err2 == nil && a.Drained && b.Drained
			})
			ended, err := m.Get(ctx, "old")
			if err != nil || ended.State != promotion.StateEnded {
				t.Fatalf("ended view %+v, %v", ended, err)
			}

			// Within the retention nothing is retired.
			clock.advance(59 * time.Minute)
			tick(20) // several retirement passes
			if p, _ := w.st.GetPromotion(ctx, "old"); !p.RetiredAt.IsZero() {
				t.Fatalf("retired at %v, within the retention", p.RetiredAt)
			}
			if n := redisKeys(t, w, "old"); n == 0 {
				t.Fatal("Redis state deleted within the retention")
			}

			// An instance marked "half" retired and died before Redis.
			if _, err := w.st.RetirePromotion(ctx, "half", clock.now()); err != nil {
				t.Fatal(err)
			}
			clock.advance(2 * time.Minute)
			wait.For(t, 30*time.Second, "the retirement of old, and half's Redis step", func() bool {
				p, err := w.st.GetPromotion(ctx, "old")
				return err == nil && !p.RetiredAt.IsZero() && redisKeys(t, w, "old") == 0 && redisKeys(t, w, "half") == 0
			})

			check := func(t *testing.T, m *promotion.Manager) {
				t.Helper()
				v, err := m.Get(ctx, "old")
				if err != nil {
					t.Fatal(err)
				}
				if v.State != promotion.StateEnded || v.RetiredAt.IsZero() || v.Counts.Issued != 2 ||
					v.Counts.Accepted != before.Counts.Accepted || *v.Counts.Remaining != *before.Counts.Remaining {
					t.Fatalf("retired view %+v, want ended with the counts of %+v", v, before)
				}
				for _, key := range []string{"", "k-u1", "k-new"} {
					if _, err := m.Claim(ctx, "old", "u1", key); !errors.Is(err, promotion.ErrEnded) {
						t.Fatalf("claim (key %q) on a retired promotion: %v, want ErrEnded", key, err)
					}
				}
				cs, err := m.UserClaims(ctx, "old", "u1")
				if err != nil || len(cs) != 1 || cs[0].Status != promotion.StatusIssued {
					t.Fatalf("user claims %+v, %v; want one issued", cs, err)
				}
				if _, err := m.Close(ctx, "old"); err != nil {
					t.Fatalf("close of a retired promotion: %v", err)
				}
				if _, err := m.Replay(ctx, "old", nil); !errors.Is(err, promotion.ErrEnded) {
					t.Fatalf("replay: %v, want ErrEnded", err)
				}
				if _, err := m.Void(ctx, "old", nil); !errors.Is(err, promotion.ErrEnded) {
					t.Fatalf("void: %v, want ErrEnded", err)
				}
				if _, err := m.Rebuild(ctx, "old"); !errors.Is(err, promotion.ErrEnded) {
					t.Fatalf("rebuild: %v, want ErrEnded", err)
				}
				if views, err := m.List(ctx, "", 10); err != nil || len(views) != 2 {
					t.Fatalf("list %d, %v", len(views), err)
				}
			}
			check(t, m)
			tick(10)
			// Another instance starting now: its first re-check and first
			// retirement pass go over the retired promotions again.
			cfg.Instance = "b"
			b := w.start(t, cfg)
			check(t, b)
			tick(10)
			for _, id := range []string{"old", "half"} {
				if n := redisKeys(t, w, id); n != 0 {
					t.Fatalf("%s: %d Redis keys made again after retirement", id, n)
				}
			}
		})
	}
}

// A negative retention is refused.
func TestRetentionValidated(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	if _, err := promotion.New(w.client, w.st, promotion.Config{Prefix: w.prefix, Retention: -time.Second}); err == nil {
		t.Fatal("negative Retention accepted")
	}
}
