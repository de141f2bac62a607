package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/benchcpu"
)

// slowlogMaxLen is the slowlog-max-len a run with -slowlog sets: room for
// every slow call of a run, so the counts are not cut at Redis's default
// of 128.
const slowlogMaxLen = 100000

// redisProbe reads the CPU, memory, command counts and slow log of each
// Redis node it was given (every master of a Cluster, each on its own
// connection).
type redisProbe struct{ nodes []rueidis.Client }

// redisReading is one reading of every node.
type redisReading struct {
	cpu      []time.Duration
	commands map[string]int64
	memory   int64
}

// newRedisProbe connects to each of the comma-separated addrs; none gives a
// probe that reads nothing.
func newRedisProbe(addrs string) (*redisProbe, error) {
	p := &redisProbe{}
	for a := range strings.SplitSeq(addrs, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}, DisableCache: true, ForceSingleClient: true})
		if err != nil {
			p.close()
			return nil, fmt.Errorf("connect to Redis %s: %w", a, err)
		}
		p.nodes = append(p.nodes, c)
	}
	return p, nil
}

func (p *redisProbe) close() {
	for _, c := range p.nodes {
		c.Close()
	}
}

// info reads an INFO section of one node as key-value pairs.
func info(ctx context.Context, c rueidis.Client, section string) map[string]string {
	out := map[string]string{}
	s, err := c.Do(ctx, c.B().Info().Section(section).Build()).ToString()
	if err != nil {
		return out
	}
	for line := range strings.Lines(s) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// read takes a reading of every node: CPU (INFO cpu), the calls of every
// command summed over the nodes (INFO commandstats), used_memory summed.
func (p *redisProbe) read(ctx context.Context) redisReading {
	r := redisReading{commands: map[string]int64{}}
	for _, c := range p.nodes {
		r.cpu = append(r.cpu, benchcpu.Redis(ctx, c))
		for k, v := range info(ctx, c, "commandstats") {
			name, ok := strings.CutPrefix(k, "cmdstat_")
			if !ok {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			r.commands[name] += n
		}
		m, _ := strconv.ParseInt(info(ctx, c, "memory")["used_memory"], 10, 64)
		r.memory += m
	}
	return r
}

// fill sets res's Redis figures per claim from two readings and n claims.
func (p *redisProbe) fill(res *loadResult, before, after redisReading, n float64) {
	if len(p.nodes) == 0 {
		return
	}
	var total time.Duration
	for i := range after.cpu {
		d := after.cpu[i] - before.cpu[i]
		total += d
		res.RedisNodesCPUus = append(res.RedisNodesCPUus, float64(d.Microseconds())/n)
	}
	res.RedisCPUus = float64(total.Microseconds()) / n
	if len(p.nodes) == 1 {
		res.RedisNodesCPUus = nil
	}
	res.Commands = map[string]int64{}
	var calls int64
	for k, v := range after.commands {
		// The probe's own INFO, CONFIG and SLOWLOG calls are not the claims'.
		if d := v - before.commands[k]; d > 0 && !slices.Contains([]string{"info", "config|set", "slowlog|reset", "slowlog|get", "config"}, k) {
			res.Commands[k] = d
			calls += d
		}
	}
	res.RedisCommands = float64(calls) / n
}

// resetSlowlog makes every node log the calls slower than threshold and
// empties its slow log.
func (p *redisProbe) resetSlowlog(ctx context.Context, threshold time.Duration) error {
	for _, c := range p.nodes {
		for _, cmd := range []rueidis.Completed{
			c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", strconv.FormatInt(threshold.Microseconds(), 10)).Build(),
			c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-max-len", strconv.Itoa(slowlogMaxLen)).Build(),
			c.B().SlowlogReset().Build(),
		} {
			if err := c.Do(ctx, cmd).Error(); err != nil {
				return fmt.Errorf("set up the slow log: %w", err)
			}
		}
	}
	return nil
}

// slowlog counts the entries of every node's slow log by command name
// (lower case) and returns the longest one, in µs.
func (p *redisProbe) slowlog(ctx context.Context) (map[string]int64, int64, error) {
	counts := map[string]int64{}
	var longest int64
	for _, c := range p.nodes {
		entries, err := c.Do(ctx, c.B().SlowlogGet().Count(slowlogMaxLen).Build()).ToArray()
		if err != nil {
			return nil, 0, fmt.Errorf("read the slow log: %w", err)
		}
		for _, e := range entries {
			f, err := e.ToArray()
			if err != nil || len(f) < 4 {
				continue
			}
			us, _ := f[2].AsInt64()
			args, _ := f[3].AsStrSlice()
			if len(args) == 0 {
				continue
			}
			counts[strings.ToLower(args[0])]++
			longest = max(longest, us)
		}
	}
	return counts, longest, nil
}

// memoryOnceTrimmed waits (bounded) for the stream's housekeeping to trim
// the acknowledged entries of key, then reads used_memory.
func (p *redisProbe) memoryOnceTrimmed(ctx context.Context, key string) int64 {
	c := p.nodes[0]
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if l, err := c.Do(ctx, c.B().Xlen().Key(key).Build()).AsInt64(); err != nil || l == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	m, _ := strconv.ParseInt(info(ctx, c, "memory")["used_memory"], 10, 64)
	return m
}
