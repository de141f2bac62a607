package stream

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/redis/rueidis"
)

// fill appends n claim-like entries in pipelined chunks.
func fill(b *testing.B, c rueidis.Client, stream string, n int) {
	b.Helper()
	const chunk = 1000
	at := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for done := 0; done < n; done += chunk {
		m := min(chunk, n-done)
		cmds := make(rueidis.Commands, m)
		for i := range m {
			rank := strconv.Itoa(done + i + 1)
			cmds[i] = c.B().Xadd().Key(stream).Id("*").FieldValue().
				FieldValue("claim_id", "bench#"+rank).FieldValue("user", "u"+rank).
				FieldValue("rank", rank).FieldValue("slot", "1").FieldValue("at", at).Build()
		}
		for _, r := range c.DoMulti(context.Background(), cmds...) {
			if err := r.Error(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkPool measures entries per second through a pool: read, a no-op
// handler, XACK. The stream is filled first, so the figure is the
// runtime's drain rate.
func BenchmarkPool(b *testing.B) {
	// consumers 0: DefaultConfig as it is, scaling included, which is what
	// a user who changes nothing gets.
	cases := []struct{ batch, consumers int }{
		{DefaultBatchSize, 0},
		{10, 1}, {10, 8},
		{100, 1}, {100, 4}, {100, 8},
		{500, 4}, {500, 8},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("batch=%d/consumers=%d", tc.batch, tc.consumers)
		if tc.consumers == 0 {
			name = "defaults"
		}
		b.Run(name, func(b *testing.B) {
			c := redistest.Client(b)
			stream := redistest.Prefix(b) + "{bench}:claims"
			if err := CreateGroup(context.Background(), c, stream, "g"); err != nil {
				b.Fatal(err)
			}
			fill(b, c, stream, b.N)
			cfg := DefaultConfig()
			if tc.consumers > 0 {
				cfg.BatchSize = tc.batch
				cfg.MinConsumers, cfg.MaxConsumers = tc.consumers, tc.consumers
				cfg.TrimAcked = false
			}
			var acked atomic.Int64
			done := make(chan struct{})
			cfg.Hooks.Ack = func(_ string, n int) {
				if acked.Add(int64(n)) == int64(b.N) {
					close(done)
				}
			}
			p, err := NewPool(c, "bench", Spec{Stream: stream, Group: "g",
				Handler: HandlerFunc(func(context.Context, []Message) []error { return nil })}, cfg)
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
			<-p.Done()
			_ = c.Do(context.Background(), c.B().Del().Key(stream).Build()).Error()
		})
	}
}
