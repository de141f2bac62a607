package claim_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/benchcpu"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// benchInFlight is how many claims the benchmarks keep in flight at once,
// close to redis-benchmark's 50 clients in scripts/bench-claim.sh.
const benchInFlight = 64

// BenchmarkClaim measures Gate.Claim throughput on the accept path: the
// stock is huge and every call is for a new user, so each one runs the whole
// script (window, limit, stock, rank, XADD). benchInFlight goroutines share
// one client, which pipelines their calls over its connections. It runs
// for promotions of each layout.
func BenchmarkClaim(b *testing.B) {
	for _, tp := range redistest.Topologies(b) {
		for _, l := range []claim.Layout{claim.LayoutCompact, claim.LayoutClassic} {
			b.Run(tp.Name+"/"+l.String(), func(b *testing.B) {
				c := tp.Client(b)
				p := redistest.Prefix(b)
				f := fixture{gate: newLayoutGate(b, c, p, l), client: c, prefix: p, layout: l}
				benchClaims(b, f, "bench", !tp.Cluster, benchInFlight, func(ctx context.Context, id, user string) error {
					_, err := f.gate.Claim(ctx, id, user, "")
					return err
				})
			})
		}
	}
}

// BenchmarkClaimBatched is BenchmarkClaim on a single node with 1, 64
// and 256 claims in flight, each claim run alone (Gate.Claim) or through a
// claim.Batcher, which sends the claims that queue up behind a promotion's
// calls in flight in one call of the batch claim script. Batched runs
// report claims/call beside BenchmarkClaim's figures; with one claim in
// flight, ns/op is a claim's latency.
func BenchmarkClaimBatched(b *testing.B) {
	tp := redistest.Topologies(b)[0]
	for _, l := range []claim.Layout{claim.LayoutCompact, claim.LayoutClassic} {
		for _, inFlight := range []int{1, 64, 256} {
			for _, batched := range []bool{false, true} {
				name := fmt.Sprintf("%s/in-flight=%d/alone", l, inFlight)
				if batched {
					name = fmt.Sprintf("%s/in-flight=%d/batched", l, inFlight)
				}
				b.Run(name, func(b *testing.B) { benchBatched(b, tp, l, inFlight, batched) })
			}
		}
	}
}

// benchBatched is one run of BenchmarkClaimBatched.
func benchBatched(b *testing.B, tp redistest.Topology, l claim.Layout, inFlight int, batched bool) {
	c := tp.Client(b)
	p := redistest.Prefix(b)
	f := fixture{gate: newLayoutGate(b, c, p, l), client: c, prefix: p, layout: l}
	// Each claim has a deadline, as the HTTP layer gives it (ClaimTimeout).
	if !batched {
		benchClaims(b, f, "bench", true, inFlight, func(ctx context.Context, id, user string) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_, err := f.gate.Claim(ctx, id, user, "")
			return err
		})
		return
	}
	bt, err := claim.NewBatcher(f.gate, claim.BatcherConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = bt.Stop(context.Background()) }()
	benchClaims(b, f, "bench", true, inFlight, func(ctx context.Context, id, user string) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := bt.Claim(ctx, id, user, "", 0)
		return err
	})
	if st := bt.Stats(); st.Calls > 0 {
		b.ReportMetric(float64(st.Batched)/float64(st.Calls), "claims/call")
	}
}

// benchClaims runs b.N accepted claims in promotion id, inFlight at once,
// each by claim, and reports claims/s. It fails if any claim was not
// accepted or the rank counter disagrees.
func benchClaims(b *testing.B, f fixture, id string, redisCPU bool, inFlight int, claim func(ctx context.Context, id, user string) error) {
	ctx := context.Background()
	now := time.Now()
	if _, err := f.gate.Open(ctx, promotionOf(id, now)); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.drop(b, id) })
	var users atomic.Int64
	b.SetParallelism(max(1, inFlight/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	var redis rueidis.Client // read Redis's CPU only where INFO reaches the one server
	if redisCPU {
		redis = f.client
	}
	cpu := benchcpu.Start(redis)
	cmds := commandStats(b, redis)
	start := time.Now()
	run := func(next func() bool) {
		for next() {
			user := "u" + strconv.FormatInt(users.Add(1), 10)
			if err := claim(ctx, id, user); err != nil {
				b.Errorf("claim for %s: %v", user, err)
				return
			}
		}
	}
	if inFlight == 1 { // one claim after the other
		n := 0
		run(func() bool { n++; return n <= b.N })
	} else {
		b.RunParallel(func(pb *testing.PB) { run(pb.Next) })
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(users.Load())/elapsed.Seconds(), "claims/s")
	cpu.Report(b, users.Load())
	reportCommands(b, cmds, commandStats(b, redis), users.Load())
	st, err := f.gate.State(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	if st.Seq != users.Load() {
		b.Fatalf("rank counter %d after %d accepted claims", st.Seq, users.Load())
	}
}

// promotionOf is the promotion of the claim benchmarks: a stock no run
// exhausts, a per-user limit of 1, open now.
func promotionOf(id string, now time.Time) claim.Promotion {
	return claim.Promotion{ID: id, Stock: 1_000_000_000, PerUserLimit: 1,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour)}
}

// cmdStat is one command's line of INFO commandstats: its calls and the
// microseconds Redis spent running it (a script's commands are counted
// apart from the script's call).
type cmdStat struct{ calls, usec int64 }

// commandStats reads INFO commandstats; nil when redis is nil.
func commandStats(b *testing.B, redis rueidis.Client) map[string]cmdStat {
	if redis == nil {
		return nil
	}
	info, err := redis.Do(context.Background(), redis.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]cmdStat{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st cmdStat
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				st.calls = n
			case "usec":
				st.usec = n
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out
}

// reportCommands reports the commands Redis ran per claim between two
// readings of commandStats (redis-cmds/claim, every command a script runs
// included) and logs, per command, its calls and its microseconds per
// claim (-v shows them).
func reportCommands(b *testing.B, before, after map[string]cmdStat, claims int64) {
	if after == nil || claims == 0 {
		return
	}
	var total int64
	var lines []string
	for name, a := range after {
		d := cmdStat{a.calls - before[name].calls, a.usec - before[name].usec}
		if name == "info" || d.calls == 0 {
			continue
		}
		total += d.calls
		lines = append(lines, fmt.Sprintf("%s %.2f calls %.2f µs", name,
			float64(d.calls)/float64(claims), float64(d.usec)/float64(claims)))
	}
	sort.Strings(lines)
	b.ReportMetric(float64(total)/float64(claims), "redis-cmds/claim")
	b.Logf("per claim: %s", strings.Join(lines, "; "))
}

// drop deletes every key of promotion id, so repeated benchmark runs do not
// pile up streams in the shared server. All keys share one slot.
func (f fixture) drop(tb testing.TB, id string) {
	tb.Helper()
	keys := append(claim.ClaimScriptKeys(f.prefix, id), f.gate.Keys(id).DeadLetters())
	if err := f.client.Do(context.Background(), f.client.B().Del().Key(keys...).Build()).Error(); err != nil {
		tb.Errorf("drop %s: %v", id, err)
	}
}

// TestClaimScriptSource runs the exported script source the way
// scripts/bench-claim.sh does (SCRIPT LOAD, then EVALSHA with
// ClaimScriptKeys) and checks it is the gate's script: the replies match
// and the gate and the raw script share one rank counter.
func TestClaimScriptSource(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp topo) {
		f := setup(t, tp)
		ctx := context.Background()
		f.open(t, claim.Promotion{ID: "raw", Stock: 2})
		keys := claim.ClaimScriptKeys(f.prefix, "raw")
		if want := f.gate.Keys("raw"); keys[0] != want.Meta() || keys[6] != want.Stream() {
			t.Fatalf("keys %v do not match the gate's", keys)
		}
		sha, err := f.client.Do(ctx, f.client.B().ScriptLoad().Script(claim.ClaimScriptSource()).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := f.gate.Claim(ctx, "raw", "u1", ""); err != nil || got.Rank != 1 {
			t.Fatalf("gate claim: %+v, %v", got, err)
		}
		evalsha := func(user string) *rueidis.RedisMessage {
			t.Helper()
			msg, err := f.client.Do(ctx, f.client.B().Evalsha().Sha1(sha).Numkeys(int64(len(keys))).
				Key(keys...).Arg(user, "", "raw").Build()).ToMessage()
			if err != nil {
				t.Fatalf("evalsha for %s: %v", user, err)
			}
			return &msg
		}
		vals, _ := evalsha("u2").ToArray()
		if s, _ := vals[0].ToString(); s != "ok" || len(vals) != 6 {
			t.Fatalf("evalsha reply %v, want ok with 6 elements", vals)
		}
		if rank, _ := vals[1].AsInt64(); rank != 2 {
			t.Fatalf("evalsha rank %d, want 2 (after the gate's rank 1)", rank)
		}
		if s, _ := evalsha("u3").ToString(); s != "sold_out" {
			t.Fatalf("third claim of a stock of 2: %q, want sold_out", s)
		}
		if _, err := f.gate.Claim(ctx, "raw", "u2", ""); !errors.Is(err, claim.ErrAlreadyClaimed) {
			t.Fatalf("gate claim after evalsha for the same user: %v, want ErrAlreadyClaimed", err)
		}
		if _, err := f.gate.Claim(ctx, "raw", "u4", ""); !errors.Is(err, claim.ErrSoldOut) {
			t.Fatalf("gate claim after evalsha sold out: %v, want ErrSoldOut", err)
		}
	})
}
