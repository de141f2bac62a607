package promotion_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
)

// quickIdle returns cfg for instance name, with a stream whose pools stop
// 300 ms after their last entry.
func quickIdle(name string, cfg promotion.Config) promotion.Config {
	cfg.Instance = name
	cfg.Stream = fastStream()
	cfg.Stream.IdleTimeout = 300 * time.Millisecond
	return cfg
}

// ownClient returns w with a client of its own on topology, as another
// process has its own connections.
func (w world) ownClient(t testing.TB, topology string) world {
	t.Helper()
	for _, tp := range redistest.Topologies(t) {
		if tp.Name == topology {
			w.client = tp.Client(t)
		}
	}
	return w
}

// hintListeners is how many instances listen for hints of promotion id.
func hintListeners(w world, id string) int64 {
	ch := claim.KeysFor(w.prefix, id).Hints()
	res, err := w.client.Do(context.Background(), w.client.B().PubsubShardnumsub().Channel(ch).Build()).ToArray()
	if err != nil || len(res) != 2 {
		return -1
	}
	n, _ := res[1].AsInt64()
	return n
}

// TestClaimWakesOtherInstance: a claim on instance A starts the pool of the
// promotion on instance B within moments, through a hint. B re-checks once
// an hour, so only the hint can explain its pool starting. On a single
// node and on Redis Cluster.
func TestClaimWakesOtherInstance(t *testing.T) {
	t.Parallel()
	for _, topology := range []string{"single", "cluster"} {
		t.Run(topology, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, topology, "sqlite")
			cfg := promotion.Config{RecheckInterval: time.Hour}
			a := w.startManager(t, quickIdle("a", cfg))
			create(t, a, promotion.Promotion{ID: "wake", Stock: 10})
			b := w.ownClient(t, topology).startManager(t, quickIdle("b", cfg)) // its first re-check starts its pool
			wait.For(t, 30*time.Second, "both instances listening", func() bool { return hintListeners(w, "wake") == 2 })
			wait.For(t, 30*time.Second, "both pools idle-stopped", func() bool {
				return !a.Registry().Running("wake") && !b.Registry().Running("wake")
			})

			if _, err := a.Claim(context.Background(), "wake", "u1", ""); err != nil {
				t.Fatal(err)
			}
			wait.For(t, 30*time.Second, "b's pool started by the hint", func() bool { return b.Registry().Running("wake") })
			waitCounts(t, a, "wake", 1, 0)
		})
	}
}

// TestRecheckCatchesLostHint: work whose hint never came (a claim-only
// process that publishes none, as if the hint were lost) is still found
// by the re-check, which starts the pool.
func TestRecheckCatchesLostHint(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	b := w.startManager(t, quickIdle("b", promotion.Config{RecheckInterval: 100 * time.Millisecond}))
	create(t, b, promotion.Promotion{ID: "lost", Stock: 10})
	wait.For(t, 30*time.Second, "b's pool idle-stopped", func() bool { return !b.Registry().Running("lost") })
	g, err := claim.New(w.client, claim.Config{Prefix: w.prefix})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Claim(context.Background(), "lost", "u1", ""); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, b, "lost", 1, 0)
}

// fakeClock is a Config.Now a test moves by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// commandCalls reads INFO commandstats: the calls per command.
func commandCalls(t testing.TB, client rueidis.Client) map[string]int64 {
	t.Helper()
	info, err := client.Do(context.Background(), client.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}

// TestIdleInstanceCommandBudget: an instance with 100 open promotions
// (stock left), each with a claim confirmed and its pool idle-stopped,
// sends Redis at most one command per second of its clock — counted with
// INFO commandstats over eleven minutes of an injected clock, one idle
// re-check of every promotion included (the re-check
// ticks every 20 ms of real time; the test moves the clock a second per
// two ticks), PINGs aside. Then: work that came without a hint is found by
// the idle re-check; and a Redis that lost everything (FLUSHALL), with no
// claim coming, is found by the loss probe and every promotion rebuilt from
// the database.
func TestIdleInstanceCommandBudget(t *testing.T) {
	t.Parallel()
	const n = 100
	srv := redistest.Fresh(t, redisserver.Options{})
	client, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{srv.Addr()}, DisableCache: true, ForceSingleClient: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	w := newWorld(t, "single", "sqlite")
	w.client = client
	clock := newFakeClock()
	var ticks, rebuilt atomic.Int64
	m := w.startManager(t, quickIdle("idle", promotion.Config{
		RecheckInterval: 20 * time.Millisecond,
		Now:             clock.Now,
		OnRebuild: func(r promotion.RebuildReport) {
			if r.Err == nil {
				rebuilt.Add(1)
			}
		},
	}))
	promotion.AfterRecheck(m, func() { ticks.Add(1) })
	// awaitTicks waits for k more re-checks.
	awaitTicks := func(k int64) {
		t.Helper()
		target := ticks.Load() + k
		wait.For(t, 30*time.Second, fmt.Sprintf("re-check %d", target), func() bool { return ticks.Load() >= target })
	}

	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("p%d", i)
		create(t, m, promotion.Promotion{ID: id, Stock: 10})
		if _, err := m.Claim(ctx, id, "u1", ""); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		id := fmt.Sprintf("p%d", i)
		waitCounts(t, m, id, 1, 0)
		wait.For(t, 30*time.Second, "the pool of "+id+" idle-stopped", func() bool { return !m.Registry().Running(id) })
	}
	awaitTicks(30) // the journal is pruned, the promotions found idle, a probe runs

	if err := client.Do(ctx, client.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	const window = 11 * time.Minute
	for range int(window / time.Second) {
		clock.Add(time.Second)
		awaitTicks(2)
	}
	calls := commandCalls(t, client)
	var total int64
	for name, k := range calls {
		switch name {
		case "info", "config|resetstat", "ping":
			// The measurement itself, and the client's keep-alive PINGs
			// of idle connections (once per Dialer.KeepAlive of real
			// time, not the instance's doing).
		default:
			total += k
		}
	}
	t.Logf("commands over %s of the instance's clock (%d re-checks): %d %v", window, 2*int(window/time.Second), total, calls)
	if budget := int64(window / time.Second); total > budget {
		t.Fatalf("%d commands over %s with %d idle promotions, budget %d: %v", total, window, n, budget, calls)
	}

	// Work that arrives with no hint (a copy of an issued claim, as a
	// replay elsewhere would add it) is found by the next idle re-check.
	k := claim.KeysFor(w.prefix, "p7")
	issued, err := w.st.ListIssued(ctx, "p7", "u1")
	if err != nil || len(issued) != 1 {
		t.Fatalf("issued %+v %v", issued, err)
	}
	add := client.B().Xadd().Key(k.Stream()).Id("*").FieldValue().
		FieldValue("claim_id", issued[0].ClaimID).FieldValue("user", "u1").
		FieldValue("rank", strconv.FormatInt(issued[0].Rank, 10)).FieldValue("slot", "1").FieldValue("at", "1").Build()
	if err := client.Do(ctx, add).Error(); err != nil {
		t.Fatal(err)
	}
	clock.Add(promotion.DefaultIdleRecheckInterval)
	wait.For(t, 30*time.Second, "the idle re-check to start the pool and drain the group", func() bool {
		return groupIdle(t, w, "p7")
	})
	waitCounts(t, m, "p7", 1, 0)

	// Redis loses everything; no claim comes. The probe finds it and every
	// promotion is rebuilt from the database.
	awaitTicks(30)
	if err := client.Do(ctx, client.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	before := ticks.Load()
	if !wait.Until(60*time.Second, func() bool { return rebuilt.Load() >= n }) {
		t.Fatalf("rebuilt %d; ticks %d -> %d", rebuilt.Load(), before, ticks.Load())
	}
	v, err := m.Get(ctx, "p3")
	if err != nil || v.Counts.Accepted != 1 || *v.Counts.Remaining != 9 {
		t.Fatalf("p3 after the rebuild: %+v, %v; want its one claim back", v.Counts, err)
	}
}

// TestIdleRecheckIntervalIsValidated: a negative interval is refused and
// named.
func TestIdleRecheckIntervalIsValidated(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	_, err := promotion.New(w.client, w.st, promotion.Config{IdleRecheckInterval: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "IdleRecheckInterval") {
		t.Fatalf("got %v", err)
	}
}
