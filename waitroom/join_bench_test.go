package waitroom

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// BenchmarkJoin joins b.N users, each once, into one room of each layout,
// from many goroutines at once (the client pipelines them), with user ids
// of 12 and 36 characters (a shop's numeric id, a UUID). Besides the time
// per join it reports joins/s, the Redis time of the join script per join
// (redis-µs/join, from INFO commandstats), Redis's CPU per join
// (redis-cpu-µs/join, INFO cpu: the server's user and system time, so
// run it alone) and the Redis memory per waiting user (B/user, INFO
// memory's used_memory after the joins less before, over b.N). Run with
// -benchtime=100000x for the figures of docs/benchmarks.md:
//
//	go test -run '^$' -bench BenchmarkJoin -benchtime=100000x ./waitroom/
func BenchmarkJoin(b *testing.B) {
	for _, layout := range []Layout{LayoutClassic, LayoutCompact} {
		for _, idLen := range []int{12, 36} {
			b.Run(fmt.Sprintf("%s/id%d", layout, idLen), func(b *testing.B) { benchJoin(b, layout, idLen) })
		}
	}
}

func benchJoin(b *testing.B, layout Layout, idLen int) {
	tp := redistest.Topology{Name: "single", Addrs: []string{redistest.Single(b).Addr()}}
	if layout == LayoutClassic {
		tp = classic(tp)
	}
	f := setup(b, tp, 1)
	f.open(b, Settings{OpensAt: time.Now().Add(time.Hour)})
	ids := make([]string, b.N)
	for i := range ids {
		n := strconv.Itoa(i)
		ids[i] = "u" + strings.Repeat("0", max(idLen-1-len(n), 0)) + n
	}
	ctx := context.Background()
	before := redisInfo(b, f.c)
	var next atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := ids[next.Add(1)-1]
			if _, err := f.rooms.Join(ctx, f.id, u); err != nil {
				b.Error(err)
				return
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	after := redisInfo(b, f.c)
	n := float64(b.N)
	b.ReportMetric(n/elapsed.Seconds(), "joins/s")
	b.ReportMetric((after.scriptUsec-before.scriptUsec)/n, "redis-µs/join")
	b.ReportMetric((after.cpu-before.cpu)*1e6/n, "redis-cpu-µs/join")
	b.ReportMetric((after.memory-before.memory)/n, "B/user")
}

// redisStats are the figures of INFO that BenchmarkJoin reports.
type redisStats struct {
	memory     float64 // used_memory, bytes
	cpu        float64 // used_cpu_user + used_cpu_sys, seconds
	scriptUsec float64 // usec of EVALSHA and EVAL, µs
}

func redisInfo(b *testing.B, c rueidis.Client) redisStats {
	b.Helper()
	text, err := c.Do(context.Background(), c.B().Info().Section("memory", "cpu", "commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var s redisStats
	for line := range strings.Lines(text) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "used_memory":
			s.memory, _ = strconv.ParseFloat(value, 64)
		case "used_cpu_user", "used_cpu_sys":
			v, _ := strconv.ParseFloat(value, 64)
			s.cpu += v
		case "cmdstat_evalsha", "cmdstat_eval":
			for field := range strings.SplitSeq(value, ",") {
				if us, ok := strings.CutPrefix(field, "usec="); ok {
					v, _ := strconv.ParseFloat(us, 64)
					s.scriptUsec += v
				}
			}
		}
	}
	return s
}
