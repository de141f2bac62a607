package promotion_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

// TestRenameReachesRunningPools renames promotions (one plain, one with
// segments) while their pools run. The instance that made the change
// issues its very next claims with the new name, in every segment's pool;
// another instance, whose re-check is too rare to help, learns it from the
// changed hint alone and issues with it too.
func TestRenameReachesRunningPools(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "single", db)
			var (
				mu    sync.Mutex
				names = map[string]string{} // promotion/user → the name the issuer saw
			)
			rec := issue.IssuerFunc(func(_ context.Context, p store.Promotion, c store.Issue) (issue.Grant, error) {
				mu.Lock()
				names[p.ID+"/"+c.UserID] = p.Name
				mu.Unlock()
				// Codes are unique across promotions: each promotion gets its own.
				return issue.Grant{Code: "C-" + p.ID + "-" + c.UserID, Value: p.Value}, nil
			})
			start := func(instance string, recheck time.Duration) *promotion.Manager {
				return w.start(t, promotion.Config{
					Prefix: w.prefix, Instance: instance, Stream: fastStream(), RecheckInterval: recheck,
					Logger: slog.New(slog.DiscardHandler), Issuers: issue.Kinds{store.KindCoupon: rec},
				})
			}
			seen := func(id, user string) string {
				mu.Lock()
				defer mu.Unlock()
				return names[id+"/"+user]
			}
			claim := func(m *promotion.Manager, id string, users ...string) {
				t.Helper()
				for _, u := range users {
					if _, err := m.Claim(t.Context(), id, u, ""); err != nil {
						t.Fatalf("claim %s by %s: %v", id, u, err)
					}
				}
			}
			// issued waits for the issuer to have seen the claims of list.
			issued := func(id string, list []string) {
				t.Helper()
				wait.For(t, 30*time.Second, fmt.Sprintf("%s: %d claims issued", id, len(list)), func() bool {
					return !slices.ContainsFunc(list, func(u string) bool { return seen(id, u) == "" })
				})
			}
			users := func(from, n int) []string {
				out := make([]string, n)
				for i := range out {
					out[i] = fmt.Sprintf("u%d", from+i)
				}
				return out
			}

			a := start("a", 50*time.Millisecond)
			create(t, a, promotion.Promotion{ID: "ren", Name: "Old", Kind: promotion.KindCoupon, Stock: 100, Value: 5})
			create(t, a, promotion.Promotion{ID: "seg", Name: "Old", Kind: promotion.KindCoupon, Stock: 100, Value: 5, Segments: 3})
			for _, id := range []string{"ren", "seg"} {
				claim(a, id, users(0, 6)...)
				issued(id, users(0, 6))
				for _, u := range users(0, 6) {
					if got := seen(id, u); got != "Old" {
						t.Fatalf("%s: %s issued with name %q, want Old", id, u, got)
					}
				}
			}

			// The instance that renames: its pools carry the new name by the
			// time Patch answers, and the next claims are issued with it.
			for _, id := range []string{"ren", "seg"} {
				if _, err := a.Patch(t.Context(), id, promotion.Change{Name: ptr("New")}); err != nil {
					t.Fatal(err)
				}
				if got := promotion.PoolNames(a, id); len(got) == 0 || slices.ContainsFunc(got, func(n string) bool { return n != "New" }) {
					t.Fatalf("%s: pools of the renaming instance hold %q, want New", id, got)
				}
				claim(a, id, users(6, 12)...)
				issued(id, users(6, 12))
				for _, u := range users(6, 12) {
					if got := seen(id, u); got != "New" {
						t.Fatalf("%s: %s issued after the rename with name %q, want New", id, u, got)
					}
				}
			}

			// Another instance, its pools running with the name it read at
			// start; its re-check comes once an hour, so only the changed
			// hint can bring the rename.
			b := start("b", time.Hour)
			claim(b, "ren", "b0")
			waitCounts(t, b, "ren", 19, 0)
			if _, err := a.Patch(t.Context(), "ren", promotion.Change{Name: ptr("Newer")}); err != nil {
				t.Fatal(err)
			}
			wait.For(t, 30*time.Second, "the other instance's pool to learn the rename", func() bool {
				return slices.Equal(promotion.PoolNames(b, "ren"), []string{"Newer"})
			})
			// Only b's pool issues from here on.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := a.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			claim(b, "ren", "b1", "b2", "b3")
			waitCounts(t, b, "ren", 22, 0)
			for _, u := range []string{"b1", "b2", "b3"} {
				if got := seen("ren", u); got != "Newer" {
					t.Fatalf("%s issued by the other instance with name %q, want Newer", u, got)
				}
			}
		})
	}
}
