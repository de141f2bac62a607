package faults

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const adminToken = "faults-admin-token"

// fastRecovery makes the entries of a killed or partitioned process come
// back within seconds: short blocking reads, reclaim after 1.5 s idle, leases
// of 1.5 s.
const fastRecovery = `stream:
  block_ms: 200
  reclaim_min_idle_ms: 1500
  lease_ttl_ms: 1500
`

// serveOpts are the settings of one `dibs serve` process.
type serveOpts struct {
	redis    string   // host:port, dibs's view of Redis (maybe a proxy)
	cluster  []string // host:port seeds of a Redis Cluster, instead of redis
	bin      string   // the dibs binary; defaults to the one built from this tree
	db       string   // database URL, dibs's view (maybe through a proxy)
	instance string   // --instance; defaults to "node"
	config   string   // YAML for --config; defaults to fastRecovery
}

// logLine is one line a dibs process logged (JSON), with when the test read it.
type logLine struct {
	at    time.Time
	level string
	msg   string
	raw   string
}

// dibsProc is a running `dibs serve` child process.
type dibsProc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	addr string        // the HTTP address it listens on
	done chan struct{} // closed once the process exited and its log was read

	mu    sync.Mutex
	lines []logLine
}

// startDibs runs dibs serve with o on a free port and waits until it
// listens. It is killed when the test ends.
func startDibs(t *testing.T, o serveOpts) *dibsProc {
	t.Helper()
	if o.instance == "" {
		o.instance = "node"
	}
	if o.config == "" {
		o.config = fastRecovery
	}
	cfg := filepath.Join(t.TempDir(), "dibs.yaml")
	if err := os.WriteFile(cfg, []byte(o.config), 0o644); err != nil {
		t.Fatal(err)
	}
	if o.bin == "" {
		o.bin = dibsBin
	}
	redis := "redis://" + o.redis
	if o.cluster != nil {
		redis = strings.Join(o.cluster, ",")
	}
	p := &dibsProc{t: t, name: o.instance, done: make(chan struct{})}
	p.cmd = exec.Command(o.bin, "serve", "--addr", "127.0.0.1:0",
		"--redis", redis, "--db", o.db, "--admin-token", adminToken,
		"--config", cfg, "--instance", o.instance, "--log-format", "json")
	p.cmd.Env = os.Environ()
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
			l := parseLogLine(sc.Text())
			p.mu.Lock()
			p.lines = append(p.lines, l)
			p.mu.Unlock()
			if l.msg == "listening" {
				var v struct{ Addr string }
				if json.Unmarshal([]byte(l.raw), &v) == nil && v.Addr != "" {
					select {
					case addrc <- v.Addr:
					default:
					}
				}
			}
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	select {
	case p.addr = <-addrc:
	case <-p.done:
		t.Fatalf("%s: dibs serve exited before listening:\n%s", p.name, p.logTail(40))
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: dibs serve did not listen within 30s:\n%s", p.name, p.logTail(40))
	}
	return p
}

func parseLogLine(s string) logLine {
	l := logLine{at: time.Now(), raw: s}
	var v struct{ Level, Msg string }
	if json.Unmarshal([]byte(s), &v) == nil {
		l.level, l.msg = v.Level, v.Msg
	}
	return l
}

// kill sends SIGKILL and waits until the process is gone.
func (p *dibsProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	p.waitExit(10 * time.Second)
}

// stop sends SIGTERM, as a rolling restart does, and waits until the
// process has drained and exited; it must exit 0.
func (p *dibsProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.waitExit(60 * time.Second)
	select {
	case <-p.done:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			p.t.Errorf("%s: dibs serve exited %d after SIGTERM:\n%s", p.name, code, p.logTail(20))
		}
	default:
	}
}

// waitExit waits until the process has exited.
func (p *dibsProc) waitExit(d time.Duration) {
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Errorf("%s: dibs serve still running after %v", p.name, d)
	}
}

// logTail returns the last n lines the process logged.
func (p *dibsProc) logTail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := p.lines
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// logsBetween returns the lines logged in [from, to) that keep says to keep.
func (p *dibsProc) logsBetween(from, to time.Time, keep func(logLine) bool) []logLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []logLine
	for _, l := range p.lines {
		if !l.at.Before(from) && l.at.Before(to) && keep(l) {
			out = append(out, l)
		}
	}
	return out
}

// backgroundNoise keeps the warnings and errors a process logs by itself —
// not the one line per failed request, whose number is the client's doing.
func backgroundNoise(l logLine) bool {
	return (l.level == "WARN" || l.level == "ERROR") && l.msg != "request failed"
}
