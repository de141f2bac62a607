package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/assembly/demo"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/testmain"
	"github.com/dibsio/dibs/issue"
)

func TestMain(m *testing.M) {
	testmain.RegisterCleanup(func() {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
	})
	redistest.Main(m)
}

// The dibs binary, built once per test run for the tests that run it as a
// real process.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func dibsBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "dibs-test-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "dibs")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// runResult is what a dibs process did.
type runResult struct {
	code           int
	stdout, stderr string
}

// runDibs runs the dibs binary with args and env added to ours, and waits
// for it within a deadline.
func runDibs(t *testing.T, env []string, args ...string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dibsBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := runResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	default:
		t.Fatalf("dibs %v: %v\nstderr:\n%s", args, err, res.stderr)
	}
	if ctx.Err() != nil {
		t.Fatalf("dibs %v did not finish within the deadline\nstdout:\n%s\nstderr:\n%s", args, res.stdout, res.stderr)
	}
	return res
}

func (r runResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// reportJSON is the part of the bench report the tests read.
type reportJSON struct {
	OK       bool           `json:"ok"`
	Claims   int            `json:"claims"`
	Accepted int64          `json:"accepted"`
	Rejected map[string]int `json:"rejected"`
	AllIssue bool           `json:"all_issued"`
	Server   struct {
		Accepted, Pending, Issued, Failed int64
	} `json:"server_counts"`
	Latency struct {
		P50, P99 float64
	} `json:"latency_ms"`
	PerSecond float64 `json:"claims_per_second"`
	Checks    []struct {
		Name, Status, Detail string
	} `json:"checks"`
	Winners []struct {
		Rank    int64  `json:"rank"`
		ClaimID string `json:"claim_id"`
		UserID  string `json:"user_id"`
		Code    string `json:"code"`
	} `json:"winners"`
}

func decodeReport(t *testing.T, r runResult) reportJSON {
	t.Helper()
	var rep reportJSON
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not a JSON report: %v\n%s", err, r)
	}
	if dec.More() {
		t.Fatalf("stdout has more than one JSON value:\n%s", r)
	}
	return rep
}

// assertReport checks a report of a run that must have passed every check.
func assertReport(t *testing.T, r runResult, rep reportJSON, claims int, accepted int64, rejected map[string]int) {
	t.Helper()
	if !rep.OK || rep.Claims != claims || rep.Accepted != accepted || !rep.AllIssue {
		t.Errorf("report: ok %v, %d claims, %d accepted, all issued %v; want ok, %d claims, %d accepted, all issued",
			rep.OK, rep.Claims, rep.Accepted, rep.AllIssue, claims, accepted)
	}
	if rep.Server.Accepted != accepted || rep.Server.Issued != accepted || rep.Server.Pending != 0 || rep.Server.Failed != 0 {
		t.Errorf("server counts %+v, want %d accepted and issued", rep.Server, accepted)
	}
	if rejected != nil {
		if fmt.Sprint(rep.Rejected) != fmt.Sprint(rejected) {
			t.Errorf("rejected %v, want %v", rep.Rejected, rejected)
		}
	}
	if rep.Latency.P50 <= 0 || rep.Latency.P99 < rep.Latency.P50 || rep.PerSecond <= 0 {
		t.Errorf("latency %+v, %v claims/s: not measured", rep.Latency, rep.PerSecond)
	}
	if len(rep.Checks) == 0 {
		t.Error("no checks in the report")
	}
	for _, c := range rep.Checks {
		if c.Status != "pass" {
			t.Errorf("check %s: %s (%s)", c.Name, c.Status, c.Detail)
		}
	}
	if t.Failed() {
		t.Log(r)
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	r := runDibs(t, nil, "demo", "--stock", "50", "--users", "100", "--waves", "2")
	if r.code != 0 {
		t.Fatalf("dibs demo failed:\n%s", r)
	}
	for _, want := range []string{
		"server listening on http://127.0.0.1:",
		"wave 1/2: 50 sent",
		"wave 2/2: 50 sent",
		"confirmed: 50/50 issued, 0 failed",
		"stock 50, 100 users, per-user limit 1, 2 waves of up to 50\n",
		"accepted       50\n",
		"rejected       sold_out 50\n",
		"PASS  ranks are exactly 1..accepted",
		"50 distinct ranks 1..50, no gaps or repeats\n",
		"OK: 8 of 8 checks passed\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if strings.Contains(r.stdout, "FAIL") {
		t.Error("stdout reports a failure")
	}
	assertWinnersText(t, r.stdout, 5)
	if t.Failed() {
		t.Log(r)
	}
}

// assertWinnersText checks the report's winners section: n lines, ranks
// 1..n in order, each with a user, its claim and a code with a valid check
// character.
func assertWinnersText(t *testing.T, stdout string, n int) {
	t.Helper()
	_, section, ok := strings.Cut(stdout, fmt.Sprintf("\nfirst %d winners\n", n))
	if !ok {
		t.Errorf("stdout lacks the winners section")
		return
	}
	codes, err := issue.NewCodes(issue.CodeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(section, "\n")
	if len(lines) < n {
		t.Fatalf("winners section %q: want %d lines", section, n)
	}
	seen := map[string]bool{}
	for i, line := range lines[:n] {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != fmt.Sprintf("#%d", i+1) || !strings.HasSuffix(f[2], fmt.Sprintf("#%d", i+1)) {
			t.Errorf("winner line %q: want #%d, user, claim id, code", line, i+1)
			continue
		}
		if !codes.Valid(f[3]) || seen[f[3]] {
			t.Errorf("winner #%d's code %q is not a valid, distinct code", i+1, f[3])
		}
		seen[f[3]] = true
	}
}

// TestDemoWaitingRoom runs the seed scenario, smaller, through a waiting
// room: every user joins, those admitted claim with their entry token, the
// rest are told sold_out in line, and every invariant holds.
func TestDemoWaitingRoom(t *testing.T) {
	t.Parallel()
	r := runDibs(t, nil, "demo", "--waiting-room", "--stock", "60", "--users", "150", "--admit-per-second", "100", "--json")
	if r.code != 0 {
		t.Fatalf("dibs demo --waiting-room failed:\n%s", r)
	}
	rep := decodeReport(t, r)
	// Claims counts the claims sent: the 90 users told sold_out in line
	// send none.
	assertReport(t, r, rep, 60, 60, map[string]int{"sold_out": 90})
	var room struct {
		WaitingRoom struct {
			AdmitPerSecond int            `json:"admit_per_second"`
			Joined         int            `json:"joined"`
			Admitted       int            `json:"admitted"`
			SoldOut        int            `json:"sold_out_in_line"`
			InLine         map[string]int `json:"left_line_otherwise"`
			Lookups        int            `json:"lookups"`
			Server         struct {
				Admitted    int64 `json:"admitted"`
				PassesSpent int64 `json:"passes_spent"`
			} `json:"server_counts"`
		} `json:"waiting_room"`
		Config struct {
			Mode string `json:"mode"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &room); err != nil {
		t.Fatal(err)
	}
	w := room.WaitingRoom
	if room.Config.Mode != "waiting_room" || w.AdmitPerSecond != 100 || w.Joined != 150 || w.Admitted != 60 || w.SoldOut != 90 || len(w.InLine) != 0 {
		t.Errorf("waiting room %+v, mode %q; want 150 joined, 60 admitted, 90 sold out in line", w, room.Config.Mode)
	}
	if w.Server.Admitted != 60 || w.Server.PassesSpent != 60 {
		t.Errorf("server room counts %+v, want 60 admitted and spent", w.Server)
	}
	found := false
	for _, c := range rep.Checks {
		found = found || c.Name == "waiting_room"
	}
	if !found {
		t.Error("no waiting_room check in the report")
	}
	for _, want := range []string{"room: 150 joined", "confirmed: 60/60 issued"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, r)
		}
	}
}

func TestDemoJSON(t *testing.T) {
	t.Parallel()
	r := runDibs(t, nil, "demo", "--stock", "40", "--users", "90", "--waves", "3", "--json")
	if r.code != 0 {
		t.Fatalf("dibs demo --json failed:\n%s", r)
	}
	rep := decodeReport(t, r)
	assertReport(t, r, rep, 90, 40, map[string]int{"sold_out": 50})
	codes, err := issue.NewCodes(issue.CodeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Winners) != 5 {
		t.Errorf("winners %+v, want the first 5", rep.Winners)
	}
	for i, w := range rep.Winners {
		if w.Rank != int64(i+1) || w.UserID == "" || w.ClaimID == "" || !codes.Valid(w.Code) {
			t.Errorf("winner %d: %+v, want rank %d with a user, a claim and a valid code", i, w, i+1)
		}
	}
	if !strings.Contains(r.stderr, "wave 3/3: 30 sent") {
		t.Errorf("progress is not on stderr:\n%s", r)
	}
}

func TestBenchOwnServer(t *testing.T) {
	t.Parallel()
	// 20 users claim three times each with a limit of two: 40 could be
	// accepted, but only 30 are in stock.
	r := runDibs(t, nil, "bench", "--stock", "30", "--users", "20", "--per-user-limit", "2", "--repeat", "3", "--concurrency", "8", "--json")
	if r.code != 0 {
		t.Fatalf("dibs bench failed:\n%s", r)
	}
	rep := decodeReport(t, r)
	assertReport(t, r, rep, 60, 30, nil)
	if n := rep.Rejected["sold_out"] + rep.Rejected["already_claimed"]; n != 30 || len(rep.Rejected) > 2 {
		t.Errorf("rejected %v, want 30 sold_out or already_claimed", rep.Rejected)
	}
}

// TestBenchTarget runs the local server of demo and bench directly and benches
// the server it started, twice, as an operator would with --target.
func TestBenchTarget(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := demo.StartServer(ctx, demo.ServerConfig{Binary: dibsBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Stop()
		}
	})
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") || srv.AdminToken == "" {
		t.Fatalf("server URL %q, token %q", srv.URL, srv.AdminToken)
	}

	for i, users := range []string{"150", "60"} {
		r := runDibs(t, nil, "bench", "--target", srv.URL, "--admin-token", srv.AdminToken,
			"--promotion", fmt.Sprintf("target-%d", i), "--stock", "100", "--users", users, "--concurrency", "16", "--json")
		if r.code != 0 {
			t.Fatalf("dibs bench --target (run %d) failed:\n%s", i+1, r)
		}
		rep := decodeReport(t, r)
		if i == 0 {
			assertReport(t, r, rep, 150, 100, map[string]int{"sold_out": 50})
		} else {
			assertReport(t, r, rep, 60, 60, map[string]int{})
		}
	}

	// The same promotion id again: the server refuses, bench says why.
	r := runDibs(t, nil, "bench", "--target", srv.URL, "--admin-token", srv.AdminToken, "--promotion", "target-0", "--users", "5")
	if r.code != 1 || !strings.Contains(r.stderr, "already_exists") {
		t.Errorf("re-using a promotion id: want exit 1 with already_exists:\n%s", r)
	}
	// A wrong token.
	r = runDibs(t, nil, "bench", "--target", srv.URL, "--admin-token", "wrong", "--users", "5")
	if r.code != 1 || !strings.Contains(r.stderr, "unauthorized") {
		t.Errorf("wrong token: want exit 1 with unauthorized:\n%s", r)
	}

	dir := srv.Dir
	stopped = true
	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory %s left behind (stat: %v)", dir, err)
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.Errorf("server still answers after Stop: %s", resp.Status)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestDemoServerFails runs the demo where redis-server cannot be found: it
// must fail with the server's own words, not hang.
func TestDemoServerFails(t *testing.T) {
	t.Parallel()
	r := runDibs(t, []string{"PATH=" + t.TempDir()}, "demo", "--stock", "5", "--users", "10", "--waves", "1")
	if r.code != 1 {
		t.Fatalf("want exit 1:\n%s", r)
	}
	if !strings.Contains(r.stderr, "local server exited before listening") || !strings.Contains(r.stderr, "its log ends:\n    ") {
		t.Errorf("stderr does not say the server failed and show its log:\n%s", r)
	}
	if !strings.Contains(r.stderr, "redis-server") {
		t.Errorf("stderr does not mention redis-server:\n%s", r)
	}
}

func TestDemoFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"demo", "-h"}, 0, "Usage: dibs demo"},
		{"bench help", []string{"bench", "-h"}, 0, "Usage: dibs bench"},
		{"unknown flag", []string{"demo", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{"argument", []string{"demo", "now"}, 2, `unexpected argument "now"`},
		{"no waves", []string{"demo", "--waves", "0"}, 2, "--waves must be at least 1"},
		{"bad stock", []string{"demo", "--stock", "-1"}, 1, "Stock must be 1..1,000,000,000"},
		{"bad concurrency", []string{"bench", "--concurrency", "100000"}, 1, "Concurrency must be"},
		{"target without token", []string{"bench", "--target", "http://127.0.0.1:1"}, 2, "--admin-token (or DIBS_ADMIN_TOKEN) is required"},
		{"unreachable target", []string{"bench", "--target", "http://127.0.0.1:1", "--admin-token", "t"}, 1, "create promotion"},
		{"room with repeat", []string{"bench", "--waiting-room", "--repeat", "2"}, 1, "Repeat must be 1 with WaitingRoom"},
		{"room with waves", []string{"bench", "--waiting-room", "--waves", "3"}, 1, "Waves must be 0 with WaitingRoom"},
		{"bad admission rate", []string{"demo", "--waiting-room", "--admit-per-second", "-5"}, 1, "AdmitPerSecond must be 1..1,000,000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runDibs(t, []string{"DIBS_ADMIN_TOKEN="}, tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("want exit %d and %q on stderr, got:\n%s", tt.code, tt.want, r)
			}
			if strings.Contains(r.stdout+r.stderr, "starting a local dibs server") {
				t.Errorf("a server was started for a bad command line:\n%s", r)
			}
		})
	}
}
