package bundle

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBundleSmoke builds the bundle with its own redis-server and libraries
// (BUNDLE_REDIS=1), unpacks it and runs run.sh with SMOKE=1: every part of
// the full run (the maximum, the open-loop runs on an external Redis, on the
// embedded default and on the floor, the SLOWLOG counts, the issuance lag,
// segments on a 3-master Cluster) for about a second each, and checks that
// the table has each of them.
func TestBundleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the benchmark bundle and runs its smoke mode")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the bundle is for Linux")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	tarball := filepath.Join(dir, "bundle.tar.gz")
	env := append(os.Environ(), "OUT="+tarball, "BUNDLE_REDIS=1", "TMPDIR="+dir)
	run(ctx, t, root, env, filepath.Join(root, "scripts", "bench-bundle-build.sh"))
	run(ctx, t, dir, env, "tar", "-xzf", tarball)

	table := filepath.Join(dir, "table.md")
	out := run(ctx, t, dir, append(env, "SMOKE=1"), filepath.Join(dir, "dibs-bench", "run.sh"), "--out", table)
	raw, err := os.ReadFile(table)
	if err != nil {
		t.Fatalf("run.sh wrote no table: %v\n%s", err, out)
	}
	got := string(raw)
	for _, row := range []string{
		"| dibs, external Redis, maximum | closed",
		"| dibs, external Redis, 25 % | open",
		"| dibs, external Redis, 80 % | open",
		"| dibs serve, embedded default (private Redis, AOF everysec), maximum |",
		"| dibs serve, embedded default, 80 % | open",
		"| HTTP floor server (202 and nothing else), maximum |",
		"| HTTP floor server, 50 % | open",
		"| segments 1, closed loop |",
		"| segments 3, closed loop |",
		"| Redis (one thread: one core at most) | 1 |",
		"| dibs above the floor |",
	} {
		if !strings.Contains(got, row) {
			t.Errorf("the table has no row %q:\n%s", row, got)
		}
	}
	// The 80 % runs on Redis count the slow log: "none" or a count per
	// command, never the "–" of a run that did not look.
	for _, line := range strings.Split(got, "\n") {
		if strings.Contains(line, ", 80 % |") && !strings.HasPrefix(line, "| HTTP floor") {
			cells := strings.Split(line, "|")
			if slow := strings.TrimSpace(cells[len(cells)-3]); slow == "–" {
				t.Errorf("no SLOWLOG count in %q", line)
			}
		}
	}
}

// run runs a command in dir and returns its output; it fails the test if
// the command fails. On the context's end the command gets SIGTERM (run.sh
// then stops the servers it started) and 30 s to exit.
func run(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}
