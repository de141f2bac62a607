package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClusterSlots(t *testing.T) {
	// What redis-cli --cluster create gives three masters.
	if got, want := clusterSlots(3), [][2]int64{{0, 5460}, {5461, 10922}, {10923, 16383}}; !slices.Equal(got, want) {
		t.Errorf("clusterSlots(3) = %v, want %v", got, want)
	}
	if got, want := clusterSlots(1), [][2]int64{{0, 16383}}; !slices.Equal(got, want) {
		t.Errorf("clusterSlots(1) = %v, want %v", got, want)
	}
}

func TestSlowText(t *testing.T) {
	if got := slowText(map[string]int64{}, 0); got != "none" {
		t.Errorf("slowText of nothing = %q, want none", got)
	}
	if got, want := slowText(map[string]int64{"xadd": 1, "evalsha": 3}, 812), "4 (evalsha 3, xadd 1; longest 812 µs)"; got != want {
		t.Errorf("slowText = %q, want %q", got, want)
	}
	many := map[string]int64{"evalsha": 40, "xadd": 8, "hget": 3, "get": 3, "incr": 1}
	if got, want := slowText(many, 900), "55 (evalsha 40, xadd 8, get 3, 2 more; longest 900 µs)"; got != want {
		t.Errorf("slowText = %q, want %q", got, want)
	}
}

// TestTable: the rows of a results file and the model of the maximum: each
// part's ceiling is its cores × 1 s ÷ its µs per claim, and the lowest one
// is named.
func TestTable(t *testing.T) {
	lines := strings.Join([]string{
		`{"label":"dibs, max","role":"ext-max","mode":"closed","connections":256,"accepted":100,"claims_per_second":40000,"server_cpu_us_per_claim":120,"redis_cpu_us_per_claim":20,"load_cpu_us_per_claim":50,"issued_after_ms":1500,"issued":100,"p99_ms":3}`,
		`{"label":"dibs, 80 %","role":"ext-80","mode":"open","target_rate":32000,"connections":1024,"accepted":100,"late":7,"claims_per_second":32000,"slowlog":{"evalsha":2},"slowlog_max_us":700,"p99_ms":1.5}`,
		`{"label":"floor, max","role":"floor-max","mode":"closed","connections":256,"accepted":100,"claims_per_second":90000,"server_cpu_us_per_claim":20}`,
		`{"label":"segments 3","role":"segments","mode":"closed","connections":256,"accepted":100,"segments":3,"claims_per_second":50000,"redis_cpu_us_per_claim":36,"redis_node_cpu_us_per_claim":[12,11,13]}`,
	}, "\n")
	file := filepath.Join(t.TempDir(), "results.jsonl")
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tableCmd([]string{"-dibs-cores", "6", "-load-cores", "8", file}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| dibs, max | closed, 256 conns | 40000 |",
		"| open, 32000/s due, 7 late |",
		"| 2 (evalsha 2; longest 700 µs) | –",
		"| 1.5 s |",
		"| segments 3 | 50000 |",
		"| 12.0 · 11.0 · 13.0 | 13.0 | 76923/s |",
		"| Redis (one thread: one core at most) | 1 | 20.0 | 50000/s |",
		"| dibs serve (Go, issuance included) | 6 | 120.0 | 50000/s |",
		"| dibs above the floor | 6 | 100.0 | 60000/s |",
		"| the load generator | 8 | 50.0 | 160000/s |",
		"The lowest ceiling is Redis's, 50000 claims/s; the measured maximum is 40000 claims/s, 80 % of it.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "| segments 3 | closed") {
		t.Errorf("a segments run is among the runs' rows:\n%s", out.String())
	}
}

func TestSplit(t *testing.T) {
	// Three samples of perf script -F ip,sym, leaf first.
	in := `
	    4a1b2c runtime.memmove
	    4a1b2d github.com/dibsio/dibs/httpapi.(*Server).ServeHTTP
	    4a1b2e net/http.(*conn).serve
	    4a1b2f runtime.goexit.abi0

	    5a1b2c modernc.org/sqlite/lib._sqlite3VdbeExec
	    5a1b2d github.com/dibsio/dibs/store/sqlite.(*Store).groupLoop
	    5a1b2f runtime.goexit.abi0

	    6a1b2c main.elsewhere
	    6a1b2f runtime.goexit.abi0
`
	var out bytes.Buffer
	if err := splitCmd([]string{"-us", "30", "-under", `ServeHTTP$`}, strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| request path: dibs handler (ServeHTTP) | 10.0 | 33.3 % |",
		"| issuance: SQLite writer | 10.0 | 33.3 % |",
		"| other: main.elsewhere | 10.0 | 33.3 % |",
		"  10.00  runtime.memmove",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("split printed\n%s\nwithout %q", out.String(), want)
		}
	}
	if err := splitCmd([]string{"-us", "30"}, strings.NewReader(""), &out); err == nil {
		t.Error("split of no samples: no error")
	}
}
