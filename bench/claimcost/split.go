package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// splitParts are the parts a sample of `dibs serve` is counted in, the
// first whose pattern one of the sample's frames matches: the request
// path (the API's handler, and net/http around it), the Redis client's
// connection goroutines, the issuance (the SQLite writer and checkpoints,
// the stream consumers and issuers), the promotion manager's loop, the
// garbage collector and the scheduler. Samples of none are counted by the root of their goroutine.
var splitParts = []struct{ name, pattern string }{
	{"issuance: SQLite writer", `store/sqlite\.\(\*Store\)\.groupLoop`},
	{"issuance: stream consumers and issuers", `dibs/stream\.\(\*Pool\)|dibs/promotion\.\(\*issuer\)`},
	{"request path: dibs handler (ServeHTTP)", `dibs/httpapi\.\(\*Server\)\.ServeHTTP$`},
	{"request path: net/http around it", `net/http\.\(\*conn\)\.serve$|net/http\.\(\*connReader\)\.backgroundRead`},
	{"issuance: SQLite checkpoints and the rest of the store", `dibs/store/sqlite\.`},
	{"Redis client connections (rueidis)", `rueidis\.\(\*pipe\)\._background`},
	{"the promotion manager's loop", `dibs/promotion\.\(\*Manager\)\.Start`},
	{"garbage collector", `runtime\.(gcBgMarkWorker|bgsweep|bgscavenge)`},
	{"scheduler", `runtime\.(mcall|schedule|findRunnable|mstart)`},
}

// splitCmd reads `perf script -F ip,sym` of a `perf record -g` of the
// server and prints the CPU per claim of each part (splitParts), the
// samples scaled to -us, the server's CPU µs per claim that load measured;
// with -under, also the functions under the frames that pattern matches,
// each with the CPU per claim of the samples it is in.
func splitCmd(args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("split", flag.ContinueOnError)
	us := fs.Float64("us", 0, "the server's CPU µs per claim (load's server_cpu_us_per_claim)")
	under := fs.String("under", "", "also list the functions under the frames this regular expression matches")
	top := fs.Int("top", 40, "functions listed with -under")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *us <= 0 {
		return errors.New("split: -us is required")
	}
	var focus *regexp.Regexp
	if *under != "" {
		var err error
		if focus, err = regexp.Compile(*under); err != nil {
			return fmt.Errorf("split: -under: %w", err)
		}
	}
	samples, err := perfSamples(in)
	if err != nil {
		return err
	}
	if len(samples) == 0 {
		return errors.New("split: no samples")
	}
	per := *us / float64(len(samples))
	parts := splitSamples(samples)
	fmt.Fprintf(out, "| part | µs per claim | share |\n| --- | ---: | ---: |\n")
	rest := 0 // the samples of the parts under 0.5 %
	for _, p := range parts {
		if 200*p.n < len(samples) {
			rest += p.n
			continue
		}
		fmt.Fprintf(out, "| %s | %.1f | %.1f %% |\n", p.name, float64(p.n)*per, 100*float64(p.n)/float64(len(samples)))
	}
	if rest > 0 {
		fmt.Fprintf(out, "| everything else (parts under 0.5 %% each) | %.1f | %.1f %% |\n", float64(rest)*per, 100*float64(rest)/float64(len(samples)))
	}
	if focus != nil {
		fmt.Fprintf(out, "\nunder %s:\n", *under)
		for _, p := range underCounts(samples, focus, *top) {
			fmt.Fprintf(out, "%7.2f  %s\n", float64(p.n)*per, p.name)
		}
	}
	return nil
}

// perfSamples reads the samples of `perf script -F ip,sym`: one frame a
// line ("ADDRESS SYMBOL"), leaf first, a blank line after each sample.
func perfSamples(in io.Reader) ([][]string, error) {
	var samples [][]string
	var cur []string
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			if len(cur) > 0 {
				samples, cur = append(samples, cur), nil
			}
			continue
		}
		if _, sym, ok := strings.Cut(line, " "); ok {
			line = strings.TrimSpace(sym)
		}
		cur = append(cur, line)
	}
	if len(cur) > 0 {
		samples = append(samples, cur)
	}
	return samples, sc.Err()
}

// counted is a name and its number of samples.
type counted struct {
	name string
	n    int
}

// splitSamples counts the samples by part, most first.
func splitSamples(samples [][]string) []counted {
	rx := make([]*regexp.Regexp, len(splitParts))
	for i, p := range splitParts {
		rx[i] = regexp.MustCompile(p.pattern)
	}
	n := map[string]int{}
	for _, st := range samples {
		n[partOf(st, rx)]++
	}
	return byCount(n)
}

// partOf names the part of one sample's frames.
func partOf(st []string, rx []*regexp.Regexp) string {
	for i, r := range rx {
		if slices.ContainsFunc(st, r.MatchString) {
			return splitParts[i].name
		}
	}
	root := st[len(st)-1]
	if len(st) > 1 && strings.HasPrefix(root, "runtime.goexit") {
		root = st[len(st)-2]
	}
	return "other: " + root
}

// underCounts counts, for each function, the samples under focus it is in.
func underCounts(samples [][]string, focus *regexp.Regexp, top int) []counted {
	n := map[string]int{}
	for _, st := range samples {
		if !slices.ContainsFunc(st, focus.MatchString) {
			continue
		}
		seen := map[string]bool{}
		for _, f := range st {
			if !seen[f] {
				seen[f] = true
				n[f]++
			}
		}
	}
	c := byCount(n)
	return c[:min(top, len(c))]
}

// byCount orders n's names by count, most first, then by name.
func byCount(n map[string]int) []counted {
	var c []counted
	for name, k := range n {
		c = append(c, counted{name, k})
	}
	slices.SortFunc(c, func(a, b counted) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.name, b.name)
	})
	return c
}
