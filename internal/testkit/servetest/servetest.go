// Package servetest runs `dibs serve` as a child process, for tests that
// kill it, restart it or cut it off from Redis or the database, and check
// what a real process does.
package servetest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/assembly/demo"
)

// Timeouts of the helpers.
const (
	// ListenTimeout bounds the wait for a started process to listen.
	ListenTimeout = 30 * time.Second
	// KillTimeout bounds the wait for a killed process to be gone.
	KillTimeout = 10 * time.Second
)

// FastRecovery is a stream configuration under which the entries of a
// killed or partitioned process come back within seconds: short blocking
// reads, reclaim after 1.5 s idle, leases of 1.5 s.
const FastRecovery = `stream:
  block_ms: 200
  reclaim_min_idle_ms: 1500
  lease_ttl_ms: 1500
`

// Options say how to run one `dibs serve`.
type Options struct {
	// Binary is the dibs binary. Required.
	Binary string
	// Redis is host:port, the process's view of Redis (maybe a proxy).
	Redis string
	// Cluster are host:port seeds of a Redis Cluster, used instead of
	// Redis when set.
	Cluster []string
	// DB is the database URL, the process's view of it.
	DB string
	// AdminToken is --admin-token. Defaults to "servetest-admin-token".
	AdminToken string
	// Instance is --instance. Defaults to "node".
	Instance string
	// Config is the YAML given with --config. Defaults to FastRecovery.
	Config string
	// LogFormat is --log-format, text or json. Defaults to text.
	LogFormat string
	// Env is added to the test's environment.
	Env []string
}

// Line is one line the process logged, with when the test read it.
type Line struct {
	At  time.Time
	Raw string
}

// Proc is a running `dibs serve` child process.
type Proc struct {
	// Addr is the HTTP address it listens on.
	Addr string

	t    testing.TB
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process exited and its log was read

	mu    sync.Mutex
	lines []Line // guarded by mu
}

// Start runs dibs serve with o on a free loopback port and waits until it
// listens. The process is killed when the test ends, and by the kernel if
// the test binary dies.
func Start(t testing.TB, o Options) *Proc {
	t.Helper()
	if o.AdminToken == "" {
		o.AdminToken = "servetest-admin-token"
	}
	if o.Instance == "" {
		o.Instance = "node"
	}
	if o.Config == "" {
		o.Config = FastRecovery
	}
	if o.LogFormat == "" {
		o.LogFormat = "text"
	}
	cfg := filepath.Join(t.TempDir(), "dibs.yaml")
	if err := os.WriteFile(cfg, []byte(o.Config), 0o644); err != nil {
		t.Fatal(err)
	}
	redis := "redis://" + o.Redis
	if o.Cluster != nil {
		redis = strings.Join(o.Cluster, ",")
	}
	p := &Proc{t: t, name: o.Instance, done: make(chan struct{})}
	p.cmd = exec.Command(o.Binary, "serve", "--addr", "127.0.0.1:0",
		"--redis", redis, "--db", o.DB, "--admin-token", o.AdminToken,
		"--config", cfg, "--instance", o.Instance, "--log-format", o.LogFormat)
	p.cmd.Env = append(os.Environ(), o.Env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.lines = append(p.lines, Line{At: time.Now(), Raw: line})
			p.mu.Unlock()
			if a, ok := demo.ListeningAddr(line); ok {
				select {
				case addrc <- a:
				default:
				}
			}
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.Kill)
	timer := time.NewTimer(ListenTimeout)
	defer timer.Stop()
	select {
	case p.Addr = <-addrc:
	case <-p.done:
		t.Fatalf("%s: dibs serve exited before listening:\n%s", p.name, p.LogTail(40))
	case <-timer.C:
		t.Fatalf("%s: dibs serve did not listen within %v:\n%s", p.name, ListenTimeout, p.LogTail(40))
	}
	return p
}

// Signal sends sig to the process and returns at once.
func (p *Proc) Signal(sig os.Signal) {
	_ = p.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	p.WaitExit(KillTimeout)
}

// WaitExit waits up to d for the process to exit; the test fails if it
// still runs then.
func (p *Proc) WaitExit(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.t.Fatalf("%s: dibs serve still running after %v:\n%s", p.name, d, p.LogTail(40))
	}
}

// ExitCode returns the process's exit code once it exited (see WaitExit),
// or -1 while it runs or when a signal ended it.
func (p *Proc) ExitCode() int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Lines returns the lines the process logged so far.
func (p *Proc) Lines() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Line(nil), p.lines...)
}

// LogTail returns the last n lines the process logged.
func (p *Proc) LogTail(n int) string {
	ls := p.Lines()
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Raw)
		b.WriteByte('\n')
	}
	return b.String()
}
