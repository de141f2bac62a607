package watermill

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-redisstream/pkg/redisstream"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/stream"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// fill appends n entries in watermill's wire format (so both consumers can
// read them) with a claim-sized payload.
func fill(b *testing.B, c rueidis.Client, key string, n int) {
	b.Helper()
	const chunk = 1000
	for done := 0; done < n; done += chunk {
		m := min(chunk, n-done)
		cmds := make(rueidis.Commands, m)
		for i := range m {
			rank := strconv.Itoa(done + i + 1)
			payload := `{"claim_id":"bench#` + rank + `","user":"u` + rank + `","rank":` + rank + `,"slot":1}`
			cmds[i] = c.B().Xadd().Key(key).Id("*").FieldValue().
				FieldValue(redisstream.UUIDHeaderKey, "uuid-"+rank).
				FieldValue("payload", payload).FieldValue("metadata", "").Build()
		}
		for _, r := range c.DoMulti(context.Background(), cmds...) {
			if err := r.Error(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCompare drains b.N entries per case: dibs at the default batch
// size and at its best setting, watermill with 1 and with 8 subscribers.
func BenchmarkCompare(b *testing.B) {
	srv := redistest.Fresh(b, redisserver.Options{AppendFsync: "off"})
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	seq := 0
	newStream := func() string {
		seq++
		return "cmp" + strconv.Itoa(seq) + ":{bench}:claims"
	}

	for _, tc := range []struct{ batch, consumers int }{{stream.DefaultBatchSize, 1}, {stream.DefaultBatchSize, 8}, {100, 4}} {
		b.Run(fmt.Sprintf("dibs/batch=%d/consumers=%d", tc.batch, tc.consumers), func(b *testing.B) {
			key := newStream()
			if err := stream.CreateGroup(context.Background(), c, key, "g"); err != nil {
				b.Fatal(err)
			}
			fill(b, c, key, b.N)
			cfg := stream.DefaultConfig()
			cfg.BatchSize = tc.batch
			cfg.MinConsumers, cfg.MaxConsumers = tc.consumers, tc.consumers
			cfg.TrimAcked = false
			var acked atomic.Int64
			done := make(chan struct{})
			cfg.Hooks.Ack = func(_ string, n int) {
				if acked.Add(int64(n)) == int64(b.N) {
					close(done)
				}
			}
			p, err := stream.NewPool(c, "bench", stream.Spec{Stream: key, Group: "g",
				Handler: stream.HandlerFunc(func(context.Context, []stream.Message) []error { return nil })}, cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			if err := p.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			<-done
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}

	for _, subs := range []int{1, 8} {
		b.Run(fmt.Sprintf("watermill/subscribers=%d", subs), func(b *testing.B) {
			key := newStream()
			fill(b, c, key, b.N)
			rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 4 * subs})
			defer rc.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var acked atomic.Int64
			done := make(chan struct{})
			var once sync.Once
			var wg sync.WaitGroup
			var subscribers []*redisstream.Subscriber
			b.ResetTimer()
			start := time.Now()
			for i := range subs {
				s, err := redisstream.NewSubscriber(redisstream.SubscriberConfig{
					Client:                        rc,
					Consumer:                      "bench-" + strconv.Itoa(i),
					ConsumerGroup:                 "g",
					OldestId:                      "0",
					DisableIndefiniteInitialBlock: true,
				}, watermill.NopLogger{})
				if err != nil {
					b.Fatal(err)
				}
				subscribers = append(subscribers, s)
				ch, err := s.Subscribe(ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					for m := range ch {
						m.Ack()
						if acked.Add(1) == int64(b.N) {
							once.Do(func() { close(done) })
						}
					}
				})
			}
			<-done
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
			cancel()
			for _, s := range subscribers {
				_ = s.Close()
			}
			wg.Wait()
		})
	}
}
