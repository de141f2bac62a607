package promotion_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
)

// memoryInstance is one instance of a sold-out memory test and how many
// claims it answered from memory.
type memoryInstance struct {
	*promotion.Manager
	fromMemory atomic.Int64
}

// memoryInstance starts an instance in w whose sold-out memory lasts ttl,
// with cfg's other fields.
func (w world) memoryInstance(t *testing.T, name string, ttl time.Duration, cfg promotion.Config) *memoryInstance {
	t.Helper()
	in := &memoryInstance{}
	cfg.Instance, cfg.SoldOutMemory = name, ttl
	cfg.OnMemoryAnswer = func(string, string) { in.fromMemory.Add(1) }
	if cfg.Stream.BatchSize == 0 {
		cfg.Stream = fastStream()
		cfg.Stream.IdleTimeout = 200 * time.Millisecond
	}
	in.Manager = w.startManager(t, cfg)
	return in
}

// remembers waits until every instance's memory answers code for id.
func remembers(t *testing.T, id, code string, ins ...*memoryInstance) {
	t.Helper()
	for i, in := range ins {
		wait.For(t, 10*time.Second, fmt.Sprintf("instance %d remembers %s %s", i, id, code), func() bool {
			return promotion.Remembers(in.Manager, id) == code
		})
	}
}

// watched waits until two instances listen for promotion id's hints.
func watched(t *testing.T, w world, id string) {
	t.Helper()
	wait.For(t, 10*time.Second, "both instances listen for hints of "+id, func() bool { return hintListeners(w, id) == 2 })
}

// redisCalls sums the calls of every command but INFO that the Redis
// servers of the topology named ran so far.
func redisCalls(t testing.TB, topology string) int64 {
	t.Helper()
	var total int64
	for _, tp := range redistest.Topologies(t) {
		if tp.Name != topology {
			continue
		}
		for _, addr := range tp.Addrs {
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.Lines(info) {
				if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") {
					continue
				}
				_, rest, _ := strings.Cut(line, "calls=")
				n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				if err != nil {
					t.Fatalf("commandstats line %q: %v", line, err)
				}
				total += n
			}
		}
	}
	return total
}

// TestSoldOutAnsweredFromMemory sells a promotion out on one instance; the
// other learns it from the hint, and both answer 1,000 rejected claims each
// with at most 1 Redis command per 100 of them. A user who holds a unit
// still gets already_claimed, and a retry with an Idempotency-Key its
// original 202. Closed, the promotion is answered ended from memory.
//
// It runs alone (no t.Parallel): it counts every command the Redis servers
// run.
func TestSoldOutAnsweredFromMemory(t *testing.T) {
	for _, topology := range []string{"single", "cluster"} {
		t.Run(topology, func(t *testing.T) {
			w := newWorld(t, topology, "sqlite")
			cfg := promotion.Config{RecheckInterval: time.Second}
			a := w.memoryInstance(t, "a", time.Minute, cfg)
			b := w.ownClient(t, topology).memoryInstance(t, "b", time.Minute, cfg)
			ctx := context.Background()
			const id, stock = "drop", 5
			create(t, a.Manager, promotion.Promotion{ID: id, Stock: stock})
			watched(t, w, id)
			first, err := a.Claim(ctx, id, "h0", "key-h0")
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < stock; i++ {
				if _, err := a.Claim(ctx, id, fmt.Sprintf("h%d", i), ""); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := a.Claim(ctx, id, "late", ""); !errors.Is(err, promotion.ErrSoldOut) {
				t.Fatalf("claim past the stock: %v", err)
			}
			// b has not claimed: it learns from a's hint.
			remembers(t, id, "sold_out", a, b)
			waitCounts(t, a.Manager, id, stock, 0)
			wait.For(t, 10*time.Second, "pools stopped", func() bool {
				return !a.Registry().Running(id) && !b.Registry().Running(id)
			})

			before, memBefore := redisCalls(t, topology), a.fromMemory.Load()+b.fromMemory.Load()
			const claims = 1000
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := g; i < 2*claims; i += 8 {
						in := a
						if i%2 == 1 {
							in = b
						}
						if _, err := in.Claim(ctx, id, fmt.Sprintf("x%d", i), ""); !errors.Is(err, promotion.ErrSoldOut) {
							t.Errorf("claim %d: %v, want sold out", i, err)
						}
					}
				})
			}
			wg.Wait()
			calls := redisCalls(t, topology) - before
			answered := a.fromMemory.Load() + b.fromMemory.Load() - memBefore
			t.Logf("%d rejected claims on two instances: %d answered from memory, %d Redis commands", 2*claims, answered, calls)
			if answered != 2*claims {
				t.Errorf("answered from memory %d of %d rejected claims", answered, 2*claims)
			}
			if calls > 2*claims/100 {
				t.Errorf("%d Redis commands for %d rejected claims, want at most 1 per 100", calls, 2*claims)
			}

			// The script answers a holder already_claimed before sold_out.
			for i, in := range []*memoryInstance{a, b} {
				if _, err := in.Claim(ctx, id, fmt.Sprintf("h%d", i+1), ""); !errors.Is(err, promotion.ErrAlreadyClaimed) {
					t.Errorf("instance %d, a holder's claim: %v, want already claimed", i, err)
				}
			}
			// A retry with its Idempotency-Key gets its original answer.
			for i, in := range []*memoryInstance{a, b} {
				res, err := in.Claim(ctx, id, "h0", "key-h0")
				if err != nil || !res.Replayed || res.ClaimID != first.ClaimID {
					t.Errorf("instance %d, retry with the key: %+v, %v; want %s replayed", i, res, err, first.ClaimID)
				}
			}

			if _, err := b.Close(ctx, id); err != nil {
				t.Fatal(err)
			}
			// The changed hint reaches a after its travel: until then a may
			// answer sold out from memory, as the contract allows.
			wait.For(t, 10*time.Second, "a forgets the sold-out promotion", func() bool {
				return promotion.Remembers(a.Manager, id) != "sold_out"
			})
			for i, in := range []*memoryInstance{a, b} {
				if _, err := in.Claim(ctx, id, "after-close", ""); !errors.Is(err, promotion.ErrEnded) {
					t.Errorf("instance %d, claim after close: %v, want ended", i, err)
				}
			}
			remembers(t, id, "ended", a, b)
			n := a.fromMemory.Load()
			if _, err := a.Claim(ctx, id, "h1", ""); !errors.Is(err, promotion.ErrEnded) || a.fromMemory.Load() != n+1 {
				t.Errorf("a holder's claim after close: %v, answered from memory: %v; want ended from memory", err, a.fromMemory.Load() == n+1)
			}
		})
	}
}

// TestStockReturnReachesEveryInstance: a unit put back in stock — a stock
// raise, a void, a revoke — is claimable on every instance that remembers
// the promotion sold out, long before the memory would expire: the change
// drops it everywhere.
func TestStockReturnReachesEveryInstance(t *testing.T) {
	t.Parallel()
	type returner func(t *testing.T, w world, m *promotion.Manager, id string)
	cases := []struct {
		name  string
		promo promotion.Promotion
		fill  []string // users whose claims take the stock
		ret   returner
	}{
		{"raise", promotion.Promotion{Stock: 2}, []string{"u1", "u2"},
			func(t *testing.T, _ world, m *promotion.Manager, id string) {
				if _, err := m.Patch(context.Background(), id, promotion.Change{Stock: ptr(int64(4))}); err != nil {
					t.Fatal(err)
				}
			}},
		{"void", promotion.Promotion{Stock: 3}, []string{"good1", "poison1", "poison2"},
			func(t *testing.T, w world, m *promotion.Manager, id string) {
				ctx := context.Background()
				waitCounts(t, m, id, 1, 2)
				dls, err := m.DeadLetters(ctx, id, "", 10)
				if err != nil || len(dls) != 2 {
					t.Fatalf("dead letters %+v %v", dls, err)
				}
				if n, err := m.Void(ctx, id, []string{dls[0].ClaimID, dls[1].ClaimID}); err != nil || n != 2 {
					t.Fatalf("void: %d, %v", n, err)
				}
			}},
		{"revoke", promotion.Promotion{Stock: 2, RevokeReturnsStock: true}, []string{"u1", "u2"},
			func(t *testing.T, _ world, m *promotion.Manager, id string) {
				waitCounts(t, m, id, 2, 0)
				res, err := m.Revoke(context.Background(), id, []string{id + "#1", id + "#2"})
				if err != nil || res.Revoked != 2 {
					t.Fatalf("revoke: %+v, %v", res, err)
				}
			}},
	}
	for _, tc := range []struct{ topology, db string }{{"single", "sqlite"}, {"cluster", "postgres"}} {
		t.Run(tc.topology, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					w := newWorld(t, tc.topology, tc.db)
					if c.name == "void" {
						poison(t, w, tc.db)
					}
					sc := fastStream()
					sc.MaxDeliveries = 2
					// The memory outlasts the test: only the change's hint
					// can let the claims below through.
					cfg := promotion.Config{Stream: sc}
					a := w.memoryInstance(t, "a", time.Hour, cfg)
					b := w.ownClient(t, tc.topology).memoryInstance(t, "b", time.Hour, cfg)
					ctx := context.Background()
					p := c.promo
					p.ID = "ret-" + c.name
					create(t, a.Manager, p)
					watched(t, w, p.ID)
					for _, u := range c.fill {
						if _, err := a.Claim(ctx, p.ID, u, ""); err != nil {
							t.Fatal(err)
						}
					}
					if _, err := b.Claim(ctx, p.ID, "late", ""); !errors.Is(err, promotion.ErrSoldOut) {
						t.Fatalf("claim past the stock: %v", err)
					}
					remembers(t, p.ID, "sold_out", a, b)
					c.ret(t, w, a.Manager, p.ID)
					for i, in := range []*memoryInstance{b, a} {
						user := fmt.Sprintf("back%d", i)
						wait.NoError(t, 10*time.Second, fmt.Sprintf("instance %d claims a unit put back", i), func() error {
							_, err := in.Claim(ctx, p.ID, user, "")
							return err
						})
					}
				})
			}
		})
	}
}

// TestSoldOutMemoryExpires: without hints between the instances, a unit
// put back on one is claimable on the other once its memory expires, on its
// clock; meanwhile a claim with an Idempotency-Key reaches Redis.
func TestSoldOutMemoryExpires(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	var clock shiftClock
	const ttl = time.Second
	cfg := promotion.Config{DisableHints: true, Now: clock.now}
	a := w.memoryInstance(t, "a", ttl, cfg)
	b := w.ownClient(t, "single").memoryInstance(t, "b", ttl, promotion.Config{DisableHints: true})
	ctx := context.Background()
	const id = "expire"
	create(t, a.Manager, promotion.Promotion{ID: id, Stock: 1})
	if _, err := a.Claim(ctx, id, "u1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Claim(ctx, id, "u2", ""); !errors.Is(err, promotion.ErrSoldOut) {
		t.Fatalf("claim past the stock: %v", err)
	}
	remembers(t, id, "sold_out", a)
	if _, err := b.Patch(ctx, id, promotion.Change{Stock: ptr(int64(3))}); err != nil {
		t.Fatal(err)
	}
	n := a.fromMemory.Load()
	if _, err := a.Claim(ctx, id, "u3", ""); !errors.Is(err, promotion.ErrSoldOut) || a.fromMemory.Load() != n+1 {
		t.Fatalf("claim on the instance that heard nothing: %v (from memory: %v), want sold out from memory",
			err, a.fromMemory.Load() == n+1)
	}
	if res, err := a.Claim(ctx, id, "u4", "key-u4"); err != nil || res.Replayed {
		t.Fatalf("claim with an Idempotency-Key: %+v, %v; want accepted by Redis", res, err)
	}
	clock.advance(ttl)
	if _, err := a.Claim(ctx, id, "u3", ""); err != nil {
		t.Fatalf("claim once the memory expired: %v", err)
	}
	if got := a.fromMemory.Load(); got != n+1 {
		t.Fatalf("answered from memory %d times, want %d", got, n+1)
	}
}

// TestSoldOutMemoryOff: with the memory off every claim reaches Redis.
func TestSoldOutMemoryOff(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	a := w.memoryInstance(t, "a", -1, promotion.Config{})
	ctx := context.Background()
	create(t, a.Manager, promotion.Promotion{ID: "off", Stock: 1})
	for i := range 20 {
		_, err := a.Claim(ctx, "off", fmt.Sprintf("u%d", i), "")
		if i > 0 && !errors.Is(err, promotion.ErrSoldOut) {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	if n := a.fromMemory.Load(); n != 0 || promotion.Remembers(a.Manager, "off") != "" {
		t.Fatalf("answered %d claims from memory with the memory off", n)
	}
}
