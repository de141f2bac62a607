package benchcpu

import (
	"crypto/sha256"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestParseStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  string
		want time.Duration
	}{
		{
			name: "plain",
			raw:  "4242 (benchcpu.test) R 1 4242 1 0 -1 4194560 1000 0 0 0 123 45 0 0 20 0 8 0 100 0 0\n",
			want: (123 + 45) * 10 * time.Millisecond,
		},
		{
			name: "command with spaces and parentheses",
			raw:  "7 (a (b) c) S 1 7 1 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 0 0\n",
			want: 100 * time.Millisecond,
		},
		{name: "no command", raw: "garbage", want: 0},
		{name: "too short", raw: "1 (x) R 1 2 3", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := parseStat([]byte(tt.raw)); got != tt.want {
				t.Fatalf("parseStat = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseInfoCPU(t *testing.T) {
	t.Parallel()
	info := "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\n" +
		"used_cpu_sys_children:9.000000\r\nused_cpu_user_children:9.000000\r\n"
	if got, want := parseInfoCPU(info), 1750*time.Millisecond; got != want {
		t.Fatalf("parseInfoCPU = %s, want %s", got, want)
	}
	if got := parseInfoCPU(""); got != 0 {
		t.Fatalf("parseInfoCPU of nothing = %s, want 0", got)
	}
}

// TestRead reads this process's and a real Redis server's CPU: both must
// be known and must not go backwards.
func TestRead(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	c := redistest.Client(t)
	// /proc counts in 10 ms ticks: work until this process has one.
	deadline := time.Now().Add(5 * time.Second)
	for x := 0; read(nil).self == 0 && time.Now().Before(deadline); x++ {
		for i := 0; i < 1_000_000; i++ {
			x ^= i
		}
	}
	first := read(c)
	// A Redis started a moment ago may not have used a measurable
	// millisecond of CPU yet; this process has.
	if first.self <= 0 || first.redis < 0 {
		t.Fatalf("first reading %+v, want both known", first)
	}
	second := read(c)
	if second.self < first.self || second.redis < first.redis {
		t.Fatalf("second reading %+v went back from %+v", second, first)
	}
	if got := read(nil); got.redis != 0 {
		t.Fatalf("reading without a client has Redis CPU %s, want 0", got.redis)
	}
}

func TestParseStatChildren(t *testing.T) {
	t.Parallel()
	raw := "4242 (postgres) S 1 4242 1 0 -1 4194560 1000 0 0 0 123 45 6 4 20 0 8 0 100 0 0\n"
	if got, want := parseStatChildren([]byte(raw)), 100*time.Millisecond; got != want {
		t.Fatalf("parseStatChildren = %s, want %s", got, want)
	}
	if got := parseStatChildren([]byte("1 (x) R 1 2 3")); got != 0 {
		t.Fatalf("parseStatChildren of a short line = %s, want 0", got)
	}
}

// TestNamed finds this test binary's own processes by their command name,
// and none for a name no process has.
func TestNamed(t *testing.T) {
	t.Parallel()
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Skip("no /proc here:", err)
	}
	// Some work, so the process has used more than a clock tick.
	buf := make([]byte, 1<<20)
	for range 64 {
		sum := sha256.Sum256(buf)
		buf[0] = sum[0]
	}
	if got := Named(strings.TrimSpace(string(comm))); got <= 0 {
		t.Fatalf("Named(%q) = %s, want the CPU time of this process", comm, got)
	}
	if got := Named("no-such-process-name"); got != 0 {
		t.Fatalf("Named of an unknown name = %s, want 0", got)
	}
}
