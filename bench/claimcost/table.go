package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Roles of the runs that the model in the table reads (claimcost load
// -role); other roles are printed as rows and read by nothing else.
const (
	roleExternalMax = "ext-max"   // dibs serve on an external Redis, closed loop
	roleFloorMax    = "floor-max" // the floor server, closed loop
	roleSegments    = "segments"  // dibs serve on a Cluster, closed loop, -segments n
)

// getCmd prints one top-level member of the JSON object on the last line
// of a file: `claimcost get FILE claims_per_second`.
func getCmd(args []string, stdout io.Writer) error {
	if len(args) != 2 {
		return errors.New("usage: claimcost get FILE MEMBER")
	}
	rows, err := readResults(args[0])
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return fmt.Errorf("%s holds no result", args[0])
	}
	raw, err := json.Marshal(rows[len(rows)-1])
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	v, ok := m[args[1]]
	if !ok {
		return fmt.Errorf("no member %q", args[1])
	}
	fmt.Fprintln(stdout, v)
	return nil
}

// readResults reads the JSON lines claimcost load printed.
func readResults(path string) ([]loadResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []loadResult
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r loadResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// tableCmd prints the Markdown table of the runs in a results file (JSON
// lines of claimcost load) and the model of where the maximum comes from.
func tableCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	dibsCores := fs.Int("dibs-cores", 0, "cores dibs serve (and the floor) were pinned to")
	loadCores := fs.Int("load-cores", 0, "cores the load generator was pinned to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: claimcost table [flags] RESULTS")
	}
	rows, err := readResults(fs.Arg(0))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	writeRuns(w, rows)
	writeSegments(w, rows)
	writeStalls(w, rows)
	writeModel(w, rows, model{dibs: *dibsCores, load: *loadCores})
	return w.Flush()
}

// f formats a figure with d decimals; "–" for nothing measured.
func f(v float64, d int) string {
	if v == 0 {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

func writeRuns(w io.Writer, rows []loadResult) {
	fmt.Fprintln(w, "| run | load | claims/s | p50 ms | p99 ms | p99.9 ms | max ms | server CPU µs/claim | Redis CPU µs/claim | load CPU µs/claim | SLOWLOG ≥ 500 µs | every claim issued after |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
	for _, r := range rows {
		if r.Role == roleSegments {
			continue
		}
		load := fmt.Sprintf("closed, %d conns", r.Connections)
		if r.Mode == "open" {
			load = fmt.Sprintf("open, %s/s due", f(r.TargetRate, 0))
			if r.Late > 0 {
				load += fmt.Sprintf(", %d late", r.Late)
			}
		}
		if r.Refused+r.Failed+r.Unsent > 0 {
			load += fmt.Sprintf(", %d refused, %d failed, %d unsent", r.Refused, r.Failed, r.Unsent)
		}
		slow := "–"
		if r.Slowlog != nil {
			slow = slowText(r.Slowlog, r.SlowlogMaxUs)
		}
		issued := "–"
		if r.Issued > 0 || r.IssuedAfterMs > 0 {
			issued = f(r.IssuedAfterMs/1000, 1) + " s"
			if r.IssueTimedOut {
				issued = fmt.Sprintf("> %s s (%d of %d)", f(r.IssuedAfterMs/1000, 0), r.Issued, r.Accepted)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Label, load,
			f(r.ClaimsPerSecond, 0), f(r.P50ms, 2), f(r.P99ms, 2), f(r.P999ms, 2), f(r.MaxMs, 1),
			f(r.ServerCPUus, 1), f(r.RedisCPUus, 1), f(r.LoadCPUus, 1), slow, issued)
	}
}

// slowShown is how many commands a SLOWLOG cell names; the rest are summed.
const slowShown = 3

// slowText is "none" or "412 (evalsha 400, xadd 8, hget 3, 1 more; longest
// 812 µs)": the total, the commands with the most entries, the longest.
func slowText(counts map[string]int64, longest int64) string {
	if len(counts) == 0 {
		return "none"
	}
	names := slices.Sorted(maps.Keys(counts))
	slices.SortStableFunc(names, func(a, b string) int { return cmp.Compare(counts[b], counts[a]) })
	var total int64
	var parts []string
	for i, k := range names {
		total += counts[k]
		if i < slowShown {
			parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	if len(names) > slowShown {
		parts = append(parts, fmt.Sprintf("%d more", len(names)-slowShown))
	}
	return fmt.Sprintf("%d (%s; longest %d µs)", total, strings.Join(parts, ", "), longest)
}

func writeSegments(w io.Writer, rows []loadResult) {
	var seg []loadResult
	for _, r := range rows {
		if r.Role == roleSegments {
			seg = append(seg, r)
		}
	}
	if len(seg) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| one promotion on a 3-master Cluster | claims/s | p99 ms | server CPU µs/claim | Redis CPU µs/claim, all masters | per master | busiest master | its ceiling (1 s ÷ busiest) |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
	for _, r := range seg {
		per := make([]string, len(r.RedisNodesCPUus))
		for i, v := range r.RedisNodesCPUus {
			per[i] = strconv.FormatFloat(v, 'f', 1, 64)
		}
		busiest := busiestNode(r)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Label, f(r.ClaimsPerSecond, 0), f(r.P99ms, 2),
			f(r.ServerCPUus, 1), f(r.RedisCPUus, 1), strings.Join(per, " · "), f(busiest, 1), ceiling(1, busiest))
	}
}

func busiestNode(r loadResult) float64 {
	if len(r.RedisNodesCPUus) == 0 {
		return r.RedisCPUus
	}
	return slices.Max(r.RedisNodesCPUus)
}

// ceiling is cores × 1 s ÷ µs per claim, as claims/s.
func ceiling(cores int, us float64) string {
	if us <= 0 || cores <= 0 {
		return "–"
	}
	return fmt.Sprintf("%s/s", f(float64(cores)*1e6/us, 0))
}

// model is the cores each part ran on.
type model struct{ dibs, load int }

func find(rows []loadResult, role string) (loadResult, bool) {
	for _, r := range rows {
		if r.Role == role {
			return r, true
		}
	}
	return loadResult{}, false
}

// writeModel explains the measured maximum from the CPU each part spent per
// claim: each part's ceiling is its cores × 1 s ÷ its µs per claim, and the
// lowest ceiling is where the maximum comes from.
func writeModel(w io.Writer, rows []loadResult, m model) {
	ext, ok := find(rows, roleExternalMax)
	if !ok {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Where the maximum (%s claims/s, closed loop on an external Redis) comes from: each part's ceiling is its cores × 1 s ÷ its CPU µs per claim.\n\n", f(ext.ClaimsPerSecond, 0))
	fmt.Fprintln(w, "| part | cores | CPU µs per claim | ceiling |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	fmt.Fprintf(w, "| Redis (one thread: one core at most) | 1 | %s | %s |\n", f(ext.RedisCPUus, 1), ceiling(1, ext.RedisCPUus))
	fmt.Fprintf(w, "| dibs serve (Go, issuance included) | %d | %s | %s |\n", m.dibs, f(ext.ServerCPUus, 1), ceiling(m.dibs, ext.ServerCPUus))
	if fl, ok := find(rows, roleFloorMax); ok {
		fmt.Fprintf(w, "| the floor server on the same cores | %d | %s | %s |\n", m.dibs, f(fl.ServerCPUus, 1), ceiling(m.dibs, fl.ServerCPUus))
		fmt.Fprintf(w, "| dibs above the floor | %d | %s | %s |\n", m.dibs, f(ext.ServerCPUus-fl.ServerCPUus, 1), ceiling(m.dibs, ext.ServerCPUus-fl.ServerCPUus))
	}
	fmt.Fprintf(w, "| the load generator | %d | %s | %s |\n", m.load, f(ext.LoadCPUus, 1), ceiling(m.load, ext.LoadCPUus))
	for _, r := range rows {
		if r.Role == roleSegments {
			fmt.Fprintf(w, "| busiest Redis master, %s | 1 | %s | %s |\n", r.Label, f(busiestNode(r), 1), ceiling(1, busiestNode(r)))
		}
	}
	// The part with the lowest ceiling is where the maximum comes from.
	parts := []struct {
		name  string
		cores int
		us    float64
	}{{"Redis", 1, ext.RedisCPUus}, {"dibs serve", m.dibs, ext.ServerCPUus}, {"the load generator", m.load, ext.LoadCPUus}}
	best, low := "", 0.0
	for _, p := range parts {
		if p.us > 0 && p.cores > 0 {
			if c := float64(p.cores) * 1e6 / p.us; best == "" || c < low {
				best, low = p.name, c
			}
		}
	}
	if best != "" {
		fmt.Fprintf(w, "\nThe lowest ceiling is %s's, %s claims/s; the measured maximum is %s claims/s, %s %% of it.\n",
			best, f(low, 0), f(ext.ClaimsPerSecond, 0), f(100*ext.ClaimsPerSecond/low, 0))
	}
}
