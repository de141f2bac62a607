package promotion_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

// stallStore holds every issue until its context ends: the instance that
// answers a claim keeps it pending, so the other instance's pool has a
// backlog to find, whether a hint or its re-check tells it.
type stallStore struct{ store.Store }

func (stallStore) IssueBatch(ctx context.Context, _ []store.Issue) ([]store.Outcome, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// BenchmarkWakeAcrossInstances measures the time from a claim on instance
// A to the start of the promotion's pool on instance B (its consumers are
// leased; its first read follows at once), with the default re-check
// interval (1 s) on both: "recheck" without hints, as before them, and
// "hint" with them. Each iteration uses a new promotion.
//
//	go test -run '^$' -bench BenchmarkWakeAcrossInstances -benchtime 20x ./promotion/
func BenchmarkWakeAcrossInstances(b *testing.B) {
	for _, mode := range []string{"recheck", "hint"} {
		b.Run(mode, func(b *testing.B) {
			w := newWorld(b, "single", "sqlite")
			cfg := promotion.Config{RecheckInterval: promotion.DefaultRecheckInterval, DisableHints: mode == "recheck"}
			wa := w
			wa.st = stallStore{w.st}
			a := wa.startManager(b, quickIdle("a", cfg))
			var mu sync.Mutex
			startedAt := map[string]time.Time{}
			cfgB := quickIdle("b", cfg)
			cfgB.Stream.Hooks.Consumers = func(stream string, n int) {
				mu.Lock()
				defer mu.Unlock()
				if _, ok := startedAt[stream]; !ok && n > 0 {
					startedAt[stream] = time.Now()
				}
			}
			w.ownClient(b, "single").startManager(b, cfgB)
			var lat []time.Duration
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				id := fmt.Sprintf("wake%d", i)
				if _, err := a.Create(ctx, promotion.Promotion{ID: id, Stock: 10}); err != nil {
					b.Fatal(err)
				}
				if mode == "hint" && !wait.Until(30*time.Second, func() bool { return hintListeners(w, id) == 2 }) {
					b.Fatal("b does not listen for hints")
				}
				// Claims fall at every tenth of the re-check interval,
				// not in step with B's re-checks.
				time.Sleep(time.Duration(i%10) * promotion.DefaultRecheckInterval / 10)
				stream := claim.KeysFor(w.prefix, id).Stream()
				t0 := time.Now()
				if _, err := a.Claim(ctx, id, "u1", ""); err != nil {
					b.Fatal(err)
				}
				var at time.Time
				if !wait.Until(30*time.Second, func() bool {
					mu.Lock()
					defer mu.Unlock()
					at = startedAt[stream]
					return !at.IsZero()
				}) {
					b.Fatal("b's pool never started")
				}
				lat = append(lat, at.Sub(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			var sum time.Duration
			for _, d := range lat {
				sum += d
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(ms(sum/time.Duration(len(lat))), "mean-ms")
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
		})
	}
}

// BenchmarkIdleInstanceCommands counts, with INFO commandstats over two
// minutes of real time, the commands an instance sends Redis when its one
// promotion is idle, its claims confirmed: "open" still takes claims (stock
// left), "quiet" is sold out; both are idle, re-checked in full every
// IdleRecheckInterval, with the loss probe in between. Both use rueidis's default client
// options. PINGs are the client's keep-alive of idle connections (one per
// connection idle for Dialer.KeepAlive, 1 s by default) and are reported
// apart; "quiet-serve" is "quiet" with the keep-alive dibs serve sets
// (1 min, see internal/assembly/service).
//
//	go test -run '^$' -bench BenchmarkIdleInstanceCommands -benchtime 1x ./promotion/
func BenchmarkIdleInstanceCommands(b *testing.B) {
	const window = 2 * time.Minute
	for _, mode := range []string{"open", "quiet", "quiet-serve"} {
		b.Run(mode, func(b *testing.B) {
			srv := redistest.Fresh(b, redisserver.Options{})
			opt := rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true, ForceSingleClient: true}
			if mode == "quiet-serve" {
				opt.Dialer.KeepAlive, opt.ConnWriteTimeout = time.Minute, 10*time.Second
			}
			client, err := rueidis.NewClient(opt)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(client.Close)
			w := newWorld(b, "single", "sqlite")
			w.client = client
			cfg := quickIdle("idle", promotion.Config{RecheckInterval: promotion.DefaultRecheckInterval})
			m := w.startManager(b, cfg)
			var ticks atomic.Int64
			promotion.AfterRecheck(m, func() { ticks.Add(1) })
			ctx := context.Background()
			stock := int64(1)
			if mode == "open" {
				stock = 2
			}
			if _, err := m.Create(ctx, promotion.Promotion{ID: "gone", Stock: stock}); err != nil {
				b.Fatal(err)
			}
			if _, err := m.Claim(ctx, "gone", "u1", ""); err != nil {
				b.Fatal(err)
			}
			if !wait.Until(30*time.Second, func() bool {
				v, err := m.Get(ctx, "gone")
				return err == nil && v.Counts.Issued == 1 && !m.Registry().Running("gone")
			}) {
				b.Fatal("the claim was not issued, or the pool kept running")
			}
			// A few re-checks: the journal is pruned, the promotion turns quiet.
			target := ticks.Load() + 3
			if !wait.Until(30*time.Second, func() bool { return ticks.Load() >= target }) {
				b.Fatal("no re-checks")
			}
			b.ResetTimer()
			for range b.N {
				if err := client.Do(ctx, client.B().ConfigResetstat().Build()).Error(); err != nil {
					b.Fatal(err)
				}
				time.Sleep(window)
				calls := commandCalls(b, client)
				var total int64
				for name, n := range calls {
					if name != "info" && name != "config|resetstat" && name != "ping" {
						total += n
					}
				}
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(float64(total)/window.Seconds(), "cmds/s")
				b.ReportMetric(float64(calls["ping"])/window.Seconds(), "pings/s")
				b.ReportMetric(float64(total+calls["ping"])*10/window.Seconds(), "all-per-10s")
				b.Logf("%s: %v", mode, calls)
			}
		})
	}
}
