package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Timeouts of the local server.
const (
	// DefaultStartTimeout covers starting redis-server, migrating the
	// database and binding the port.
	DefaultStartTimeout = 30 * time.Second
	// DefaultStopTimeout is the graceful drain allowed after SIGTERM before
	// the server is killed.
	DefaultStopTimeout = 15 * time.Second
	// logTailLines is how much of the server's log an error shows.
	logTailLines = 30
)

// ServerConfig says how to run a local server.
type ServerConfig struct {
	// Binary is the dibs binary to run as `dibs serve`. Defaults to this
	// process's own executable.
	Binary string
	// Keep leaves the temporary directory in place after Stop.
	Keep bool
	// LogTo receives the server's log as it is written; nil keeps it quiet
	// (the tail is still shown when the server fails).
	LogTo io.Writer
	// StartTimeout bounds the wait for the server to listen and be ready.
	// Defaults to DefaultStartTimeout.
	StartTimeout time.Duration
	// StopTimeout bounds the graceful drain after SIGTERM. Defaults to
	// DefaultStopTimeout.
	StopTimeout time.Duration
	// ConfigYAML, when set, is written to the temporary directory and given
	// to the server as --config. Defaults to none.
	ConfigYAML string
}

// Server is a throw-away `dibs serve` child on the embedded default:
// this binary re-executed with a private redis-server and a SQLite file,
// both in a temporary directory.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL string
	// AdminToken is the random admin token the server was started with.
	AdminToken string
	// Dir is the temporary directory holding the database and Redis data.
	Dir string

	cfg  ServerConfig
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

// StartServer starts the server and waits until it listens and answers
// /readyz. On failure everything it started is stopped and removed, and the
// error carries the tail of the server's log.
func StartServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = DefaultStopTimeout
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
	s := &Server{
		AdminToken: localToken(),
		Dir:        dir,
		cfg:        cfg,
		log:        newServerLog(cfg.LogTo),
		done:       make(chan struct{}),
	}
	args := []string{"serve",
		"--addr", "127.0.0.1:0",
		"--db", "sqlite://" + filepath.Join(dir, "dibs.db"),
		"--admin-token", s.AdminToken,
	}
	if cfg.ConfigYAML != "" {
		file := filepath.Join(dir, "dibs.yaml")
		if err := os.WriteFile(file, []byte(cfg.ConfigYAML), 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("local server: %w", err)
		}
		args = append(args, "--config", file)
	}
	s.cmd = exec.Command(exe, args...)
	s.cmd.Env = ServerEnv(os.Environ(), dir)
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

// ServerEnv is the environment for the child: ours, without the
// settings that would point it away from the embedded default, plus the
// data directory for its redis-server.
func ServerEnv(env []string, dir string) []string {
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
func (s *Server) awaitReady(ctx context.Context) error {
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
func (s *Server) Exited() bool {
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
func (s *Server) Stop() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop() })
	return s.stopErr
}

func (s *Server) stop() error {
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
