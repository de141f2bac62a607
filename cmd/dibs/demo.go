package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dibsio/dibs/bench"
)

// The seed scenario: 1,000 stock, 2,000 users in 10 waves of 200.
const (
	demoStock = 1000
	demoUsers = 2000
	demoWaves = 10
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: dibs demo [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Starts a throw-away server on the embedded default (a private redis-server and a")
		fmt.Fprintln(stderr, "SQLite file in a temporary directory), runs the seed scenario through the HTTP API,")
		fmt.Fprintln(stderr, "prints the report and exits 0 only if every invariant held.")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Flags:")
		fs.PrintDefaults()
	}
	stock := fs.Int("stock", demoStock, "promotion stock")
	users := fs.Int("users", demoUsers, "number of users, each claiming once")
	waves := fs.Int("waves", demoWaves, "number of waves the users are split into; each wave's claims start together")
	confirmTimeout := fs.Duration("confirm-timeout", bench.DefaultConfirmTimeout, "how long to wait for every accepted claim to be issued")
	var opts runOptions
	opts.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg := bench.Config{
		Stock:          *stock,
		Users:          *users,
		Waves:          *waves,
		PerUserLimit:   1,
		ConfirmTimeout: *confirmTimeout,
	}
	if *waves < 1 {
		fmt.Fprintln(stderr, "dibs demo: --waves must be at least 1")
		return errUsage
	}
	return runScenario(ctx, cfg, opts, stdout, stderr)
}

// parseFlags parses args and maps failures to the CLI's conventions: -h is
// flag.ErrHelp, anything else (already reported by the flag set) errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "dibs %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}

// runOptions are the output and local-server flags demo and bench share.
type runOptions struct {
	json      bool
	keep      bool
	serverLog bool
}

func (o *runOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print the report as one JSON object (progress goes to stderr)")
	fs.BoolVar(&o.keep, "keep", false, "keep the local server's temporary directory (database, Redis AOF, log)")
	fs.BoolVar(&o.serverLog, "server-log", false, "stream the local server's log to stderr")
}

// runScenario runs cfg against cfg.Target, or, when that is empty, against a
// throw-away local server it starts and stops around the run. It prints
// progress and the report, and returns nil only if every check passed and
// the local server (if any) stopped cleanly.
func runScenario(ctx context.Context, cfg bench.Config, opts runOptions, stdout, stderr io.Writer) error {
	progress := stdout
	if opts.json {
		progress = stderr
	}
	cfg.Progress = progress

	var srv *localServer
	if cfg.Target == "" {
		// Find a bad flag before paying for a server.
		probe := cfg
		probe.Target, probe.AdminToken = "http://127.0.0.1:1", "x"
		if err := probe.Validate(); err != nil {
			return err
		}
		var logTo io.Writer
		if opts.serverLog {
			logTo = stderr
		}
		fmt.Fprintln(progress, "starting a local dibs server (embedded Redis and SQLite) ...")
		var err error
		srv, err = startLocalServer(ctx, localServerConfig{Keep: opts.keep, LogTo: logTo})
		if err != nil {
			return err
		}
		fmt.Fprintf(progress, "server listening on %s, data in %s\n", srv.URL, srv.Dir)
		cfg.Target, cfg.AdminToken = srv.URL, srv.AdminToken
	}

	rep, runErr := bench.Run(ctx, cfg)
	var stopErr error
	if srv != nil {
		stopErr = srv.Stop()
		if opts.keep {
			fmt.Fprintf(progress, "kept %s\n", srv.Dir)
		}
	}
	if runErr != nil {
		// stopErr says why when the run failed because the server died.
		return errors.Join(runErr, stopErr)
	}

	fmt.Fprintln(progress)
	var werr error
	if opts.json {
		werr = rep.WriteJSON(stdout)
	} else {
		werr = rep.WriteText(stdout)
	}
	var checkErr error
	if !rep.OK() {
		checkErr = fmt.Errorf("invariant checks failed: %s", strings.Join(rep.Failed(), ", "))
	}
	return errors.Join(checkErr, werr, stopErr)
}

// Timeouts of the local server.
const (
	// localStartTimeout covers starting redis-server, migrating the
	// database and binding the port.
	localStartTimeout = 30 * time.Second
	// localStopTimeout is the graceful drain allowed after SIGTERM before
	// the server is killed.
	localStopTimeout = 15 * time.Second
	// logTailLines is how much of the server's log an error shows.
	logTailLines = 30
)

// localServerConfig says how to run a local server.
type localServerConfig struct {
	// Binary is the dibs binary to run as `dibs serve`. Defaults to this
	// process's own executable.
	Binary string
	// Keep leaves the temporary directory in place after Stop.
	Keep bool
	// LogTo receives the server's log as it is written; nil keeps it quiet
	// (the tail is still shown when the server fails).
	LogTo io.Writer
	// StartTimeout bounds the wait for the server to listen and be ready.
	// Defaults to localStartTimeout.
	StartTimeout time.Duration
	// StopTimeout bounds the graceful drain after SIGTERM. Defaults to
	// localStopTimeout.
	StopTimeout time.Duration
}

// localServer is a throw-away `dibs serve` child on the embedded default:
// this binary re-executed with a private redis-server and a SQLite file,
// both in a temporary directory.
type localServer struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL string
	// AdminToken is the random admin token the server was started with.
	AdminToken string
	// Dir is the temporary directory holding the database and Redis data.
	Dir string

	cfg  localServerConfig
	cmd  *exec.Cmd
	log  *serverLog
	done chan struct{} // closed once cmd.Wait has returned
	// waitErr is cmd.Wait's result: written by the waiting goroutine
	// before done is closed, read only after done is closed.
	waitErr  error
	waiter   sync.WaitGroup
	stopOnce sync.Once
	stopErr  error
}

// startLocalServer starts the server and waits until it listens and answers
// /readyz. On failure everything it started is stopped and removed, and the
// error carries the tail of the server's log.
func startLocalServer(ctx context.Context, cfg localServerConfig) (*localServer, error) {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = localStartTimeout
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = localStopTimeout
	}
	exe := cfg.Binary
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("local server: find own binary: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "dibs-demo-")
	if err != nil {
		return nil, fmt.Errorf("local server: %w", err)
	}
	s := &localServer{
		AdminToken: localToken(),
		Dir:        dir,
		cfg:        cfg,
		log:        newServerLog(cfg.LogTo),
		done:       make(chan struct{}),
	}
	s.cmd = exec.Command(exe, "serve",
		"--addr", "127.0.0.1:0",
		"--db", "sqlite://"+filepath.Join(dir, "dibs.db"),
		"--admin-token", s.AdminToken,
	)
	s.cmd.Env = localServerEnv(os.Environ(), dir)
	s.cmd.Dir = dir
	s.cmd.Stdout = s.log
	s.cmd.Stderr = s.log
	// A child that exits but leaves its output pipes open (a grandchild
	// holding them) must not hang Wait.
	s.cmd.WaitDelay = 5 * time.Second
	setParentDeathSignal(s.cmd)
	if err := s.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("local server: start %s serve: %w", exe, err)
	}
	s.waiter.Go(func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	})

	if err := s.awaitReady(ctx); err != nil {
		// The error below already carries the log; Stop's own report of
		// the same failure would only repeat it.
		_ = s.Stop()
		if cfg.Keep {
			err = fmt.Errorf("%w (kept %s)", err, dir)
		}
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w; its log ends:\n%s", err, s.log.tailText())
	}
	return s, nil
}

// localServerEnv is the environment for the child: ours, without the
// settings that would point it away from the embedded default, plus the
// data directory for its redis-server.
func localServerEnv(env []string, dir string) []string {
	drop := []string{"DIBS_ADDR=", "DIBS_REDIS_URL=", "DIBS_DATABASE_URL=", "DIBS_ADMIN_TOKEN=", "DIBS_CONFIG=", "DIBS_DATA_DIR="}
	out := make([]string, 0, len(env)+1)
next:
	for _, kv := range env {
		for _, d := range drop {
			if strings.HasPrefix(kv, d) {
				continue next
			}
		}
		out = append(out, kv)
	}
	return append(out, "DIBS_DATA_DIR="+dir)
}

// awaitReady waits for the `listening addr=` log line, then for /readyz to
// answer 200, within StartTimeout.
func (s *localServer) awaitReady(ctx context.Context) error {
	deadline := time.NewTimer(s.cfg.StartTimeout)
	defer deadline.Stop()
	select {
	case addr := <-s.log.addr:
		s.URL = "http://" + addr
	case <-s.done:
		return fmt.Errorf("local server exited before listening (%v))", s.waitErr)
	case <-deadline.C:
		return fmt.Errorf("local server did not log %q within %s", "listening addr=...", s.cfg.StartTimeout)
	case <-ctx.Done():
		return fmt.Errorf("local server: %w", ctx.Err())
	}

	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		if err != nil {
			return fmt.Errorf("local server: %w", err)
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-s.done:
			return fmt.Errorf("local server exited before it was ready (%v))", s.waitErr)
		case <-deadline.C:
			return fmt.Errorf("local server not ready within %s (last /readyz: %s)", s.cfg.StartTimeout, last)
		case <-ctx.Done():
			return fmt.Errorf("local server: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// Exited reports whether the server process has ended.
func (s *localServer) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, waits up to StopTimeout for the graceful drain, kills
// the server if it is still running, and removes the temporary directory
// unless Keep is set. It returns an error if the server had died on its own
// or did not exit 0 after SIGTERM, with the tail of its log. Safe to call
// more than once.
func (s *localServer) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop() })
	return s.stopErr
}

func (s *localServer) stop() error {
	diedEarly := s.Exited()
	var err error
	if !diedEarly {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(s.cfg.StopTimeout)
		select {
		case <-s.done:
		case <-timer.C:
			_ = s.cmd.Process.Kill()
			<-s.done
			err = fmt.Errorf("local server did not stop within %s of SIGTERM and was killed; its log ends:\n%s", s.cfg.StopTimeout, s.log.tailText())
		}
		timer.Stop()
	}
	s.waiter.Wait()
	switch {
	case err != nil:
	case diedEarly:
		err = fmt.Errorf("local server exited during the run (%v); its log ends:\n%s", s.waitErr, s.log.tailText())
	case s.waitErr != nil:
		err = fmt.Errorf("local server did not stop cleanly (%v); its log ends:\n%s", s.waitErr, s.log.tailText())
	}
	if !s.cfg.Keep {
		if rerr := os.RemoveAll(s.Dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", s.Dir, rerr))
		}
	}
	return err
}

func localToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// serverLog collects the local server's output: it keeps the last lines for
// error messages, forwards everything to an optional writer, and announces
// the address from the first `listening addr=` line. Written by the exec
// package's copying goroutines, read by the caller, so guarded by mu.
type serverLog struct {
	mu      sync.Mutex
	forward io.Writer
	partial []byte
	lines   []string // the last logTailLines complete lines
	found   bool
	// addr receives the listening address once; buffered so Write never
	// blocks on it.
	addr chan string
}

func newServerLog(forward io.Writer) *serverLog {
	return &serverLog{forward: forward, addr: make(chan string, 1)}
}

// Write implements io.Writer; it never fails, so the server is never
// blocked or broken by its log.
func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.forward != nil {
		_, _ = l.forward.Write(p)
	}
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.addLine(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	// A line without end must not grow without bound.
	if len(l.partial) > 64<<10 {
		l.addLine(string(l.partial))
		l.partial = nil
	}
	return len(p), nil
}

func (l *serverLog) addLine(line string) {
	line = strings.TrimRight(line, "\r")
	if len(l.lines) == logTailLines {
		copy(l.lines, l.lines[1:])
		l.lines = l.lines[:logTailLines-1]
	}
	l.lines = append(l.lines, line)
	if !l.found {
		if addr, ok := listeningAddr(line); ok {
			l.found = true
			l.addr <- addr
		}
	}
}

// tailText is the last lines of the log, indented, for error messages.
func (l *serverLog) tailText() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines
	if len(l.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(l.partial))
	}
	if len(lines) == 0 {
		return "    (the server wrote nothing)"
	}
	return "    " + strings.Join(lines, "\n    ")
}

var (
	// listeningMsg matches the message "listening" in slog's text
	// (msg=listening, msg="listening") and JSON ("msg":"listening") forms.
	listeningMsg = regexp.MustCompile(`(?:^|\s)msg="?listening"?(?:\s|$)|"msg":\s*"listening"`)
	textAddr     = regexp.MustCompile(`(?:^|\s)addr="?([^\s"]+)"?`)
	jsonAddr     = regexp.MustCompile(`"addr":\s*"([^"]+)"`)
)

// listeningAddr returns the address of a `listening addr=HOST:PORT` log
// line, in slog's text or JSON form.
func listeningAddr(line string) (string, bool) {
	if !listeningMsg.MatchString(line) {
		return "", false
	}
	for _, re := range []*regexp.Regexp{jsonAddr, textAddr} {
		if m := re.FindStringSubmatch(line); m != nil {
			return m[1], true
		}
	}
	return "", false
}
