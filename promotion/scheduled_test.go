package promotion_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

// readCounter is a store that counts the reads that prepare a promotion in
// Redis (its definition and its rank floor).
type readCounter struct {
	store.Store
	reads atomic.Int64
}

func (s *readCounter) GetPromotion(ctx context.Context, id string) (store.Promotion, error) {
	s.reads.Add(1)
	return s.Store.GetPromotion(ctx, id)
}

func (s *readCounter) MaxRanks(ctx context.Context, ids []string) (map[string]int64, error) {
	s.reads.Add(1)
	return s.Store.MaxRanks(ctx, ids)
}

// groupExists reports whether the promotion's stream has its issuers group.
func groupExists(t *testing.T, w world, id string) bool {
	t.Helper()
	groups, err := w.client.Do(context.Background(),
		w.client.B().XinfoGroups().Key(claim.KeysFor(w.prefix, id).Stream()).Build()).ToArray()
	return err == nil && len(groups) == 1
}

// TestScheduledIsReadyBeforeItsStart: a promotion created with starts_at in
// the future has its Redis keys and consumer group at once, and so has one
// only the database held when an instance starts; the first claim after
// the start does no set-up: no database read, no open, one script call.
func TestScheduledIsReadyBeforeItsStart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	counted := &readCounter{Store: w.st}
	w.st = counted
	ctx := context.Background()

	// In the database alone (created by an instance that died before
	// preparing Redis): the start of an instance prepares it.
	start := time.Now().UTC().Truncate(time.Millisecond).Add(time.Hour)
	if err := w.st.CreatePromotion(ctx, store.Promotion{ID: "later", Mode: store.ModeFirstCome,
		Kind: store.KindCoupon, Stock: 10, PerUserLimit: 1, StartsAt: start, EndsAt: start.Add(time.Hour),
		CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// Re-checks far apart: only creation and the start prepare anything.
	m := w.startManager(t, promotion.Config{Instance: "a", RecheckInterval: time.Hour})
	if !groupExists(t, w, "later") || redisKeys(t, w, "later") == 0 {
		t.Fatal("a scheduled promotion in the database is not prepared by the start")
	}

	starts := time.Now().Add(300 * time.Millisecond)
	create(t, m, promotion.Promotion{ID: "soon", Stock: 10, StartsAt: starts, EndsAt: starts.Add(time.Hour)})
	if !groupExists(t, w, "soon") || redisKeys(t, w, "soon") == 0 {
		t.Fatal("keys and group not ready after creating a scheduled promotion")
	}
	reads := counted.reads.Load()
	var first time.Duration
	wait.For(t, 30*time.Second, "the promotion to start", func() bool {
		begin := time.Now()
		_, err := m.Claim(ctx, "soon", "u1", "")
		first = time.Since(begin)
		if err != nil && !errors.Is(err, promotion.ErrNotStarted) {
			t.Fatalf("claim: %v", err)
		}
		return err == nil
	})
	if n := counted.reads.Load() - reads; n != 0 {
		t.Fatalf("the claims around the start read the database %d times: set-up on the claim path", n)
	}
	t.Logf("first claim after the start: %s", first)
}

// BenchmarkFirstClaim times the first claim on a promotion: "prepared" is
// one created on this instance (its Redis state and group ready before its
// start), "unprepared" one only the database holds, as before promotions
// were prepared at creation and start: the claim waits for the loop to read
// and open it.
func BenchmarkFirstClaim(b *testing.B) {
	w := newWorld(b, "single", "sqlite")
	m := w.startManager(b, promotion.Config{Instance: "a", RecheckInterval: time.Hour})
	ctx := context.Background()
	i := 0 // ids stay unique across runs of the sub-benchmarks
	for _, prepared := range []bool{true, false} {
		name := "unprepared"
		if prepared {
			name = "prepared"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				i++
				id := name + "-" + strconv.Itoa(i)
				now := time.Now().UTC().Truncate(time.Millisecond)
				p := store.Promotion{ID: id, Mode: store.ModeFirstCome, Kind: store.KindCoupon, Stock: 10,
					PerUserLimit: 1, StartsAt: now.Add(-time.Second), EndsAt: now.Add(time.Hour), CreatedAt: now}
				if prepared {
					if _, err := m.Create(ctx, promotion.Promotion{ID: id, Stock: 10}); err != nil {
						b.Fatal(err)
					}
				} else if err := w.st.CreatePromotion(ctx, p); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := m.Claim(ctx, id, "u1", ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
