package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestSourceAddr(t *testing.T) {
	seen := map[[4]byte]int{}
	for i := range 100000 {
		a := sourceAddr(i)
		if a[0] != 127 || a[1] != 0 || a[2] != 0 || a[3] < 2 {
			t.Fatalf("sourceAddr(%d) = %v, want 127.0.0.2 … 127.0.0.255", i, a)
		}
		seen[a]++
	}
	if len(seen) != 254 {
		t.Errorf("100,000 streams dial from %d addresses, want 254", len(seen))
	}
	for a, n := range seen {
		if n > 100000/254+1 {
			t.Errorf("%v holds %d streams, more than its share", a, n)
		}
	}
	if sourceAddr(0) != [4]byte{127, 0, 0, 2} || sourceAddr(253) != [4]byte{127, 0, 0, 255} || sourceAddr(254) != sourceAddr(0) {
		t.Errorf("sourceAddr does not deal 127.0.0.2 … 127.0.0.255 in turn")
	}
}

// TestSnapOf: INFO all as Redis writes it, sections and CRLF included.
func TestSnapOf(t *testing.T) {
	info := strings.Join([]string{
		"# Memory", "used_memory:1048576", "used_memory_human:1.00M", "",
		"# CPU", "used_cpu_sys:1.500000", "used_cpu_user:0.250000",
		"# Commandstats",
		"cmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,rejected_calls=0,failed_calls=0",
		"cmdstat_info:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0",
		"cmdstat_xinfo|groups:calls=2,usec=10,usec_per_call=5.00,rejected_calls=0,failed_calls=0",
		"not a pair",
	}, "\r\n")
	s := snapOf(parseInfo(info))
	if s.memory != 1<<20 || s.cpu != 1750*time.Millisecond {
		t.Errorf("snapOf: memory %d, cpu %v; want 1048576, 1.75s", s.memory, s.cpu)
	}
	if s.calls["evalsha"] != 12 || s.calls["xinfo|groups"] != 2 || s.calls["info"] != 3 || len(s.calls) != 3 {
		t.Errorf("snapOf: calls %v", s.calls)
	}
	total, by := callsBetween(map[string]int64{"evalsha": 2, "info": 1}, s.calls)
	if total != 12 || by["evalsha"] != 10 || by["xinfo|groups"] != 2 || by["info"] != 0 {
		t.Errorf("callsBetween = %d %v, want 12 without info", total, by)
	}
}

func TestMetricValue(t *testing.T) {
	text := []byte("# HELP go_memstats_heap_inuse_bytes x\n# TYPE go_memstats_heap_inuse_bytes gauge\n" +
		"go_memstats_heap_inuse_bytes_total 1\ngo_memstats_heap_inuse_bytes 2.5e+07\ngo_goroutines 12\n")
	if v, ok := metricValue(text, "go_memstats_heap_inuse_bytes"); !ok || v != 2.5e7 {
		t.Errorf("metricValue = %v %v, want 2.5e7", v, ok)
	}
	if _, ok := metricValue(text, "go_memstats_stack_inuse_bytes"); ok {
		t.Error("metricValue found a metric that is not there")
	}
	if got := statusRSS([]byte("Name:\tdibs\nVmRSS:\t  2048 kB\nThreads: 9\n")); got != 2<<20 {
		t.Errorf("statusRSS = %d, want 2 MiB", got)
	}
}

// TestSSEScan: the markers are found when a read cuts them in two, and a
// stream answered other than 200 counts as failed.
func TestSSEScan(t *testing.T) {
	ready, hint := []byte(`"status":"waiting"`), []byte("hint abc")
	stream := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nretry: 2000\n\nevent: status\n" +
		`data: {"status":"waiting","position":3}` + "\n\n: keep-alive\n\nevent: status\n" +
		`data: {"status":"waiting","position":3,"message":"hint abc"}` + "\n\n"
	for cut := 1; cut < len(stream); cut += 7 {
		var s sseScan
		var scratch []byte
		var readies, hints int
		for part := range slicesOf(stream, cut) {
			var r, h bool
			r, h, scratch = s.feed(scratch, []byte(part), ready, hint)
			readies += b2i(r)
			hints += b2i(h)
		}
		if readies != 1 || hints != 1 || s.failed {
			t.Fatalf("reads of %d bytes: ready %d, hinted %d, failed %v; want 1, 1, false", cut, readies, hints, s.failed)
		}
	}
	var s sseScan
	r, _, _ := s.feed(nil, []byte("HTTP/1.1 503 Service Unavailable\r\n\r\n"+`{"status":"waiting"}`), ready, hint)
	if r || !s.failed {
		t.Errorf("a 503: ready %v, failed %v; want false, true", r, s.failed)
	}
}

func slicesOf(s string, n int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestWriteRoom(t *testing.T) {
	var out bytes.Buffer
	writeRoom(&out, roomResult{Users: 100000, Paused: true, Streams: 100000, JoinsPerSecond: 25000, RedisBytesPerUser: 120,
		Hinted: 100000, HintMs: 420, IdleRedisUs: 0.2, LookupRedisCommands: 0.01}, "Layout: x.")
	for _, want := range []string{
		"| joins/s, closed loop | 25000 | ≥ 20,000 | yes |",
		"| Redis memory per waiting user (used_memory) | 120 B | ≤ 100 B | no |",
		"| 420 ms (100000 of 100000 streams) | ≤ 1,000 ms | yes |",
		"paused: the line stands still",
		"Layout: x.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the room's table lacks %q:\n%s", want, out.String())
		}
	}
}
