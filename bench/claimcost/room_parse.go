package main

import (
	"bufio"
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// The pure parts of claimcost room: reading INFO and /metrics, and where
// each stream dials from.

// firstSourceHost and sourceHosts: the streams of claimcost room dial from
// 127.0.0.2 … 127.0.0.255, so that no source address needs more than a
// share of its 64k ephemeral ports.
const (
	firstSourceHost = 2
	sourceHosts     = 254
)

// sourceAddr is the loopback address stream i dials from: the streams are
// dealt round the 254 addresses 127.0.0.2 … 127.0.0.255 in turn.
func sourceAddr(i int) [4]byte {
	return [4]byte{127, 0, 0, byte(firstSourceHost + i%sourceHosts)}
}

// parseInfo reads the lines "key:value" of an INFO answer (any sections);
// section headers, blank lines and lines without a colon are skipped.
func parseInfo(s string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// probeCommands are the commands the measurement itself sends, left out of
// a delta of command calls.
var probeCommands = []string{"info", "config", "config|set", "config|get", "slowlog|reset", "slowlog|get", "ping", "hello", "client|setinfo"}

// commandCalls reads the calls of each command from INFO commandstats
// ("cmdstat_evalsha:calls=12,usec=…"), by command name.
func commandCalls(info map[string]string) map[string]int64 {
	out := map[string]int64{}
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(v, ",") {
			if n, ok := strings.CutPrefix(field, "calls="); ok {
				calls, err := strconv.ParseInt(n, 10, 64)
				if err == nil {
					out[name] = calls
				}
			}
		}
	}
	return out
}

// callsBetween is the calls made between two readings of commandCalls,
// in all and by command, the measurement's own commands left out.
func callsBetween(before, after map[string]int64) (int64, map[string]int64) {
	var total int64
	by := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 && !slices.Contains(probeCommands, k) {
			by[k] = d
			total += d
		}
	}
	return total, by
}

// metricValue is the value of the first sample of metric name (without
// labels) in a Prometheus text exposition; ok false if there is none.
func metricValue(text []byte, name string) (float64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok || rest == "" || rest[0] != ' ' {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		return v, err == nil
	}
	return 0, false
}

// statusRSS is the resident set size in bytes from a /proc/PID/status
// ("VmRSS:  123456 kB"); 0 if absent.
func statusRSS(status []byte) int64 {
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// sseScan follows one event stream's bytes for two markers, which may be
// cut across reads: it keeps the last bytes of what it saw.
type sseScan struct {
	tail           []byte
	opened, failed bool // the status line was read: 200, or not
	ready, hinted  bool // the first standing, and the hint, were seen
}

// scanKeep is how many bytes of a read sseScan keeps for the next: more
// than the longest marker.
const scanKeep = 96

// feed looks at the next bytes of the stream for the status line, ready
// (the first standing) and hint (the message), and says which it saw for
// the first time now.
func (s *sseScan) feed(scratch, data, ready, hint []byte) (nowReady, nowHinted bool, _ []byte) {
	scratch = append(append(scratch[:0], s.tail...), data...)
	if !s.opened {
		if len(scratch) < len("HTTP/1.1 200 ") {
			s.tail = append(s.tail[:0], scratch...)
			return false, false, scratch
		}
		s.opened = true
		s.failed = !bytes.HasPrefix(scratch, []byte("HTTP/1.1 200 "))
	}
	if !s.failed {
		if !s.ready && bytes.Contains(scratch, ready) {
			s.ready, nowReady = true, true
		}
		if !s.hinted && len(hint) > 0 && bytes.Contains(scratch, hint) {
			s.hinted, nowHinted = true, true
		}
	}
	keep := scratch[max(0, len(scratch)-scanKeep):]
	s.tail = append(s.tail[:0], keep...)
	return nowReady, nowHinted, scratch
}
