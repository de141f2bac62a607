package benchcpu

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// minSelf is the least process CPU worth reporting: /proc counts in 10 ms
// ticks, so below 200 ms the figure would be off by more than 5 %.
const minSelf = 200 * time.Millisecond

// Meter is a reading taken when a benchmark's timed part starts; Report
// turns the difference to a second reading into per-claim metrics.
type Meter struct {
	redis rueidis.Client // nil: Redis's CPU is not read
	start sample
}

// sample is the CPU time used so far by this process and by Redis. A zero
// field means it could not be read.
type sample struct{ self, redis time.Duration }

// Start takes the first reading. redis is the client whose server's CPU is
// counted; pass nil to leave Redis out (a Cluster, or no Redis at all).
func Start(redis rueidis.Client) Meter {
	return Meter{redis: redis, start: read(redis)}
}

// Report adds the CPU used since Start per claim as the metrics
// cpu-µs/claim (this process) and redis-µs/claim. Nothing is reported for
// zero claims.
func (m Meter) Report(b *testing.B, claims int64) {
	if claims == 0 {
		return
	}
	now := read(m.redis)
	if m.start.self > 0 && now.self-m.start.self >= minSelf {
		b.ReportMetric(float64((now.self-m.start.self).Microseconds())/float64(claims), "cpu-µs/claim")
	}
	if m.start.redis > 0 {
		b.ReportMetric(float64((now.redis-m.start.redis).Microseconds())/float64(claims), "redis-µs/claim")
	}
}

func read(redis rueidis.Client) sample {
	var s sample
	if raw, err := os.ReadFile("/proc/self/stat"); err == nil {
		s.self = parseStat(raw)
	}
	if redis != nil {
		info, err := redis.Do(context.Background(), redis.B().Info().Section("cpu").Build()).ToString()
		if err == nil {
			s.redis = parseInfoCPU(info)
		}
	}
	return s
}

// parseStat returns the user plus system time of a /proc/PID/stat line:
// fields 14 and 15, counted after the parenthesised command name (which may
// hold spaces), in USER_HZ ticks of 10 ms on Linux. Zero if absent.
func parseStat(raw []byte) time.Duration { return statTicks(raw, 11) }

// statTicks returns the sum of two adjacent tick counts of a /proc/PID/stat
// line, the first at index first of the fields after the command name, as a
// duration (USER_HZ ticks of 10 ms). Zero if absent.
func statTicks(raw []byte, first int) time.Duration {
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) <= first+1 {
		return 0
	}
	u, _ := strconv.ParseInt(f[first], 10, 64)
	k, _ := strconv.ParseInt(f[first+1], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

// parseInfoCPU returns used_cpu_sys plus used_cpu_user from the reply of
// INFO cpu (seconds, as decimals).
func parseInfoCPU(info string) time.Duration {
	var d time.Duration
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			sec, _ := strconv.ParseFloat(v, 64)
			d += time.Duration(sec * float64(time.Second))
		}
	}
	return d
}

// Process returns the CPU time (user plus system) process pid has used so
// far, read from /proc/PID/stat; zero if it cannot be read.
func Process(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	return parseStat(raw)
}

// Named returns the CPU time used so far by every process whose command
// name is comm (as /proc/PID/comm gives it), their exited children
// included: the processes of a server that forks one per connection, such
// as PostgreSQL. Zero if there is none.
func Named(comm string) time.Duration {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var d time.Duration
	for _, e := range dirs {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil || !bytes.HasPrefix(raw[bytes.IndexByte(raw, ' ')+1:], []byte("("+comm+")")) {
			continue
		}
		d += parseStat(raw) + parseStatChildren(raw)
	}
	return d
}

// parseStatChildren is the cutime + cstime of a /proc/PID/stat line: the
// CPU time of the process's children that exited and were waited for.
func parseStatChildren(raw []byte) time.Duration { return statTicks(raw, 13) }

// Redis returns the CPU time the server of client has used so far
// (used_cpu_sys plus used_cpu_user of INFO cpu); zero if it cannot be read.
func Redis(ctx context.Context, client rueidis.Client) time.Duration {
	info, err := client.Do(ctx, client.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		return 0
	}
	return parseInfoCPU(info)
}
