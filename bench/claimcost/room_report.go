package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// roomResult is what one run of claimcost room measured.
type roomResult struct {
	Users               int              `json:"users"`
	Connections         int              `json:"connections"`
	Paused              bool             `json:"paused"`
	Joined              int64            `json:"joined"`
	JoinsPerSecond      float64          `json:"joins_per_second"`
	JoinRedisCommands   float64          `json:"join_redis_commands"`
	RedisBytesPerUser   float64          `json:"redis_bytes_per_waiting_user"`
	Streams             int64            `json:"streams"`
	StreamsFailed       int64            `json:"streams_failed"`
	OpenSeconds         float64          `json:"open_seconds"`
	IdleSeconds         float64          `json:"idle_seconds"`
	IdleRedisUs         float64          `json:"idle_redis_cpu_us_per_stream_per_second"`
	IdleRedisCommands   float64          `json:"idle_redis_commands_per_stream_per_second"`
	IdleServerUs        float64          `json:"idle_server_cpu_us_per_stream_per_second"`
	HeapBytesPerStream  float64          `json:"server_heap_bytes_per_stream"`
	StackBytesPerStream float64          `json:"server_stack_bytes_per_stream"`
	RSSBytesPerStream   float64          `json:"server_rss_bytes_per_stream"`
	Hinted              int64            `json:"hinted"`
	HintMs              float64          `json:"hint_ms"`
	Lookups             int64            `json:"lookups"`
	LookupsFailed       int64            `json:"lookups_failed,omitempty"`
	LookupsPerSecond    float64          `json:"lookups_per_second"`
	LookupRedisCommands float64          `json:"lookup_redis_commands"`
	LookupRedisUs       float64          `json:"lookup_redis_cpu_us"`
	LookupServerUs      float64          `json:"lookup_server_cpu_us"`
	LookupCommands      map[string]int64 `json:"lookup_commands,omitempty"`
}

// redisSnap is one reading of a Redis node: its CPU time (used_cpu_sys
// plus used_cpu_user), used_memory and the calls of each command.
type redisSnap struct {
	cpu    time.Duration
	memory int64
	calls  map[string]int64
}

// snapOf reads a redisSnap from the fields of INFO all (parseInfo).
func snapOf(info map[string]string) redisSnap {
	s := redisSnap{calls: commandCalls(info)}
	for _, k := range []string{"used_cpu_sys", "used_cpu_user"} {
		sec, _ := strconv.ParseFloat(info[k], 64)
		s.cpu += time.Duration(sec * float64(time.Second))
	}
	s.memory, _ = strconv.ParseInt(info["used_memory"], 10, 64)
	return s
}

// redisSnapshot reads the node of c (INFO all); an empty reading if it
// cannot.
func redisSnapshot(ctx context.Context, c rueidis.Client) redisSnap {
	s, err := c.Do(ctx, c.B().Arbitrary("INFO", "all").Build()).ToString()
	if err != nil {
		fmt.Fprintln(os.Stderr, "claimcost: INFO:", err)
	}
	return snapOf(parseInfo(s))
}

// serverMem is the server's memory: heap and stacks in use (its /metrics)
// and its resident set (/proc).
type serverMem struct {
	heap, stack float64
	rss         int64
}

// serverMemory reads the memory of the server at target, process pid.
func serverMemory(ctx context.Context, hc *http.Client, target string, pid int) serverMem {
	var m serverMem
	if code, raw, err := send(ctx, hc, http.MethodGet, target+"/metrics", "", ""); err == nil && code == http.StatusOK {
		m.heap, _ = metricValue(raw, "go_memstats_heap_inuse_bytes")
		m.stack, _ = metricValue(raw, "go_memstats_stack_inuse_bytes")
	}
	if raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status"); err == nil {
		m.rss = statusRSS(raw)
	}
	return m
}

// roomTarget is one row of the waiting room's table: a figure, how it
// reads, and the target for one instance on 16 cores.
type roomTarget struct {
	what, value, target string
	met                 bool
}

// roomRows are the rows of a run against the waiting room's targets.
func roomRows(r roomResult) []roomTarget {
	kb := func(b float64) string { return f(b/1024, 1) + " KB" }
	streams := fmt.Sprintf("%d of %d", r.Streams, r.Users)
	if r.StreamsFailed > 0 {
		streams += fmt.Sprintf(" (%d failed)", r.StreamsFailed)
	}
	hint := fmt.Sprintf("%s ms (%d of %d streams)", f(r.HintMs, 0), r.Hinted, r.Streams)
	return []roomTarget{
		{"joins/s, closed loop", f(r.JoinsPerSecond, 0), "≥ 20,000", r.JoinsPerSecond >= 20000},
		{"Redis memory per waiting user (used_memory)", f(r.RedisBytesPerUser, 0) + " B", "≤ 100 B", r.RedisBytesPerUser <= 100},
		{"Redis commands per join (calls inside scripts counted)", f(r.JoinRedisCommands, 2), "–", true},
		{fmt.Sprintf("idle event streams held (opened in %s s)", f(r.OpenSeconds, 1)), streams, "100,000", r.Streams >= 100000},
		{"Redis CPU per idle stream", f(r.IdleRedisUs, 3) + " µs/s", "≤ 0.5 µs/s", r.IdleRedisUs <= 0.5},
		{"Redis commands per idle stream", f(r.IdleRedisCommands, 4) + " /s", "–", true},
		{"dibs CPU per idle stream", f(r.IdleServerUs, 3) + " µs/s", "≤ 3 µs/s", r.IdleServerUs <= 3},
		{"dibs heap per stream (in use, garbage included)", kb(r.HeapBytesPerStream), "≤ 16 KB", r.HeapBytesPerStream <= 16<<10},
		{"dibs stack, RSS per stream", kb(r.StackBytesPerStream) + ", " + kb(r.RSSBytesPerStream), "–", true},
		{"a hint (the room's message) reaches every stream", hint, "≤ 1,000 ms", r.Hinted >= r.Streams && r.HintMs <= 1000},
		{"status lookups/s, closed loop", f(r.LookupsPerSecond, 0), "≥ 50,000", r.LookupsPerSecond >= 50000},
		{"Redis commands per lookup (calls inside scripts counted)", f(r.LookupRedisCommands, 4), "≤ 0.05", r.LookupRedisCommands <= 0.05},
		{"Redis CPU, dibs CPU per lookup", f(r.LookupRedisUs, 2) + " µs, " + f(r.LookupServerUs, 1) + " µs", "–", true},
	}
}

// writeRoom prints the waiting room's table.
func writeRoom(w io.Writer, r roomResult, note string) {
	line := "moving at its admission rate"
	if r.Paused {
		line = "paused: the line stands still"
	}
	fmt.Fprintf(w, "Waiting room, one instance: %d users joined and each holding an event stream (%s; %d connections for joins and lookups).\n\n", r.Users, line, r.Connections)
	fmt.Fprintln(w, "| waiting room | measured | target (16 cores) | met |")
	fmt.Fprintln(w, "| --- | ---: | ---: | --- |")
	for _, t := range roomRows(r) {
		met := "–"
		if t.target != "–" {
			met = map[bool]string{true: "yes", false: "no"}[t.met]
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.what, t.value, t.target, met)
	}
	if note != "" {
		fmt.Fprintf(w, "\n%s\n", note)
	}
}
