package promotion_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
)

// BenchmarkSoldOutStampede: 10,000 users, 64 at a time, claim a promotion
// of 1,000 units on one instance (single Redis, SQLite), with the sold-out
// memory on (its default, 1 s) and off. Each iteration is one drop on a new
// promotion. It reports accepted claims per second (1,000 over the time
// until the last accept returned) and rejected claims per second (the
// others, over the time from the first rejection to the end) of that run.
// Then, once the accepted claims are confirmed and the pool stopped, 10,000
// more users claim the sold-out promotion the same way: the Redis commands
// the server ran meanwhile (INFO commandstats, which counts the commands a
// script runs too), per claim.
//
//	go test -run '^$' -bench BenchmarkSoldOutStampede -benchtime 5x ./promotion/
func BenchmarkSoldOutStampede(b *testing.B) {
	for _, mem := range []struct {
		name string
		ttl  time.Duration
	}{{"memory", 0}, {"no-memory", -1}} {
		b.Run(mem.name, func(b *testing.B) {
			w := newWorld(b, "single", "sqlite")
			sc := fastStream()
			sc.IdleTimeout = 200 * time.Millisecond
			m := w.startManager(b, promotion.Config{Instance: "a", SoldOutMemory: mem.ttl, Stream: sc, RecheckInterval: time.Second})
			ctx := context.Background()
			const stock, users, workers = 1000, 10_000, 64
			// stampede has users claim promotion id, their ids prefixed,
			// and returns when each accepted claim and the first rejected
			// one returned, and the end.
			stampede := func(id, prefix string) (accepted, rejected int64, lastAccept, firstReject, end time.Duration) {
				var acc, rej, last, first, next atomic.Int64
				var wg sync.WaitGroup
				start := time.Now()
				for range workers {
					wg.Go(func() {
						for i := next.Add(1) - 1; i < users; i = next.Add(1) - 1 {
							_, err := m.Claim(ctx, id, prefix+strconv.FormatInt(i, 10), "")
							at := int64(time.Since(start))
							switch {
							case err == nil:
								acc.Add(1)
								last.Store(max(last.Load(), at))
							case errors.Is(err, promotion.ErrSoldOut):
								rej.Add(1)
								first.CompareAndSwap(0, at)
							default:
								b.Errorf("claim: %v", err)
								return
							}
						}
					})
				}
				wg.Wait()
				return acc.Load(), rej.Load(), time.Duration(last.Load()), time.Duration(first.Load()), time.Since(start)
			}
			var accRate, rejRate, cmdsPer float64
			for n := range b.N {
				id := fmt.Sprintf("drop%d", n)
				if _, err := m.Create(ctx, promotion.Promotion{ID: id, Stock: stock}); err != nil {
					b.Fatal(err)
				}
				acc, rej, lastAccept, firstReject, end := stampede(id, "u")
				if acc != stock {
					b.Fatalf("accepted %d, want %d", acc, stock)
				}
				accRate += float64(acc) / lastAccept.Seconds()
				rejRate += float64(rej) / (end - firstReject).Seconds()
				if !wait.Until(time.Minute, func() bool {
					v, err := m.Get(ctx, id)
					return err == nil && v.Counts.Issued == stock && !m.Registry().Running(id)
				}) {
					b.Fatal("the accepted claims were not confirmed")
				}
				before := redisCalls(b, "single")
				if _, rej, _, _, _ := stampede(id, "late"); rej != users {
					b.Fatalf("after the drop: %d rejected, want %d", rej, users)
				}
				cmdsPer += float64(redisCalls(b, "single")-before) / users
			}
			b.ReportMetric(accRate/float64(b.N), "accepted/s")
			b.ReportMetric(rejRate/float64(b.N), "rejected/s")
			b.ReportMetric(rejRate/accRate, "rejected/accepted")
			b.ReportMetric(cmdsPer/float64(b.N), "redis-cmds/late-claim")
		})
	}
}
