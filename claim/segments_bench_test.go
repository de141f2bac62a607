package claim_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// BenchmarkClaimSegments measures pipelined Gate.ClaimSegmented throughput
// on the three-master Cluster with 1 and 3 segments, and the Redis CPU
// each master spent per claim (INFO cpu on each master before and after):
// with one segment one master runs every claim script; with three, each
// runs a third. The stock is huge, so every claim runs the accept path.
func BenchmarkClaimSegments(b *testing.B) {
	addrs := redistest.Cluster(b)
	masters := make([]rueidis.Client, len(addrs))
	for i, a := range addrs {
		masters[i] = redistest.Topology{Name: "node", Addrs: []string{a}}.Client(b)
	}
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("segments=%d", n), func(b *testing.B) {
			c := redistest.ClusterClient(b)
			g := newGate(b, c, redistest.Prefix(b))
			ctx := context.Background()
			id := "bench-" + strconv.Itoa(n)
			s := claim.SegmentsOf(id, n)
			now := time.Now()
			if _, err := g.OpenSegments(ctx, claim.Promotion{ID: id, Stock: 1_000_000_000, PerUserLimit: 1,
				StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)}, s, 0); err != nil {
				b.Fatal(err)
			}
			var users atomic.Int64
			b.SetParallelism(max(1, benchInFlight/runtime.GOMAXPROCS(0)))
			before := mastersCPU(masters)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					u := "u" + strconv.FormatInt(users.Add(1), 10)
					if _, err := g.ClaimSegmented(ctx, s, u, ""); err != nil {
						b.Errorf("claim for %s: %v", u, err)
						return
					}
				}
			})
			elapsed := time.Since(start)
			b.StopTimer()
			after := mastersCPU(masters)
			claims := float64(users.Load())
			b.ReportMetric(claims/elapsed.Seconds(), "claims/s")
			var top time.Duration
			for i := range masters {
				d := after[i] - before[i]
				top = max(top, d)
				b.ReportMetric(float64(d.Microseconds())/claims, fmt.Sprintf("m%d-redis-µs/claim", i))
			}
			// The busiest master's CPU per claim bounds the promotion's
			// claims per second: 1e6 / this is one core's ceiling.
			b.ReportMetric(float64(top.Microseconds())/claims, "top-master-µs/claim")
		})
	}
}

// mastersCPU reads used_cpu_sys + used_cpu_user of each master.
func mastersCPU(masters []rueidis.Client) []time.Duration {
	out := make([]time.Duration, len(masters))
	for i, c := range masters {
		info, err := c.Do(context.Background(), c.B().Info().Section("cpu").Build()).ToString()
		if err != nil {
			continue
		}
		for line := range strings.Lines(info) {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
				var sec float64
				fmt.Sscan(v, &sec)
				out[i] += time.Duration(sec * float64(time.Second))
			}
		}
	}
	return out
}
