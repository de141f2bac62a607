package faults

import (
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/servetest"
)

const adminToken = "faults-admin-token"

// serveOpts are the settings of one `dibs serve` process.
type serveOpts struct {
	redis    string   // host:port, dibs's view of Redis (maybe a proxy)
	cluster  []string // host:port seeds of a Redis Cluster, instead of redis
	bin      string   // the dibs binary; defaults to the one built from this tree
	db       string   // database URL, dibs's view (maybe through a proxy)
	instance string   // --instance; defaults to "node"
	config   string   // YAML for --config; defaults to servetest.FastRecovery
}

// logLine is one line a dibs process logged (JSON), with when the test read it.
type logLine struct {
	at    time.Time
	level string
	msg   string
	raw   string
}

// dibsProc is a running `dibs serve` child process, logging JSON.
type dibsProc struct {
	*servetest.Proc
	t    *testing.T
	name string
	addr string // the HTTP address it listens on
}

// startDibs runs dibs serve with o on a free port and waits until it
// listens. It is killed when the test ends.
func startDibs(t *testing.T, o serveOpts) *dibsProc {
	t.Helper()
	if o.instance == "" {
		o.instance = "node"
	}
	if o.bin == "" {
		o.bin = dibsBin
	}
	p := servetest.Start(t, servetest.Options{
		Binary: o.bin, Redis: o.redis, Cluster: o.cluster, DB: o.db, AdminToken: adminToken,
		Instance: o.instance, Config: o.config, LogFormat: "json",
	})
	return &dibsProc{Proc: p, t: t, name: o.instance, addr: p.Addr}
}

func parseLogLine(l servetest.Line) logLine {
	out := logLine{at: l.At, raw: l.Raw}
	var v struct{ Level, Msg string }
	if json.Unmarshal([]byte(l.Raw), &v) == nil {
		out.level, out.msg = v.Level, v.Msg
	}
	return out
}

// stop sends SIGTERM, as a rolling restart does, and waits until the
// process has drained and exited; it must exit 0.
func (p *dibsProc) stop() {
	p.Signal(syscall.SIGTERM)
	p.WaitExit(60 * time.Second)
	if code := p.ExitCode(); code != 0 {
		p.t.Errorf("%s: dibs serve exited %d after SIGTERM:\n%s", p.name, code, p.LogTail(20))
	}
}

// logsBetween returns the lines logged in [from, to) that keep says to keep.
func (p *dibsProc) logsBetween(from, to time.Time, keep func(logLine) bool) []logLine {
	var out []logLine
	for _, raw := range p.Lines() {
		l := parseLogLine(raw)
		if !l.at.Before(from) && l.at.Before(to) && keep(l) {
			out = append(out, l)
		}
	}
	return out
}

// backgroundNoise keeps the warnings and errors a process logged by itself —
// not the one line per failed request, whose number is the client's doing.
func backgroundNoise(l logLine) bool {
	return (l.level == "WARN" || l.level == "ERROR") && l.msg != "request failed"
}
