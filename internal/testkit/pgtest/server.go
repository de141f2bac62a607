package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Server is a PostgreSQL server run for tests: its own data directory and
// loopback port, trust authentication, user postgres, durability off.
type Server struct {
	bin  string              // directory holding initdb and postgres
	base string              // temporary directory: data/ and postgres.log
	cred *syscall.Credential // who the server runs as; nil for the current user
	port int

	mu   sync.Mutex
	proc *process // the running server, nil while stopped
}

// process is one postgres child and the goroutine that waits for it.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // cmd.Wait's result; written before done is closed
}

// URL returns the URL of the server's postgres database.
func (s *Server) URL() string {
	return s.urlFor("postgres")
}

func (s *Server) urlFor(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Port returns the server's loopback TCP port.
func (s *Server) Port() int { return s.port }

// newServer creates a data directory with initdb and starts the server on a
// free port.
func newServer(ctx context.Context) (*Server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	// MkdirTemp makes the directory 0700; the server's user must be able to
	// reach it, and it sits under the world-traversable temporary directory.
	base, err := os.MkdirTemp(os.TempDir(), "dibs-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{bin: bin, base: base, cred: cred}
	if err := s.prepare(ctx); err != nil {
		_ = os.RemoveAll(base)
		return nil, err
	}
	// Another process may take the port between choosing and binding it;
	// a few fresh ports make that harmless.
	for attempt := 1; ; attempt++ {
		if s.port, err = freePort(); err == nil {
			err = s.Start(ctx)
		}
		if err == nil {
			return s, nil
		}
		if attempt == 3 || ctx.Err() != nil {
			_ = os.RemoveAll(base)
			return nil, err
		}
	}
}

// prepare hands the directory to the server's user and runs initdb.
func (s *Server) prepare(ctx context.Context) error {
	if err := os.Chmod(s.base, 0o755); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if s.cred != nil {
		if err := os.Chown(s.base, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "initdb"),
		"-D", s.dataDir(), "-A", "trust", "-U", "postgres", "--no-sync",
		"--locale=C", "--encoding=UTF8")
	cmd.Dir = s.base
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	return nil
}

func (s *Server) dataDir() string { return filepath.Join(s.base, "data") }
func (s *Server) logPath() string { return filepath.Join(s.base, "postgres.log") }

// Start starts the server (again) with the same data directory and port and
// waits until it accepts connections.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("pgtest: server already running")
	}
	logFile, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer logFile.Close() // the child has its own copy
	logStart, _ := logFile.Seek(0, 2)
	cmd := exec.Command(filepath.Join(s.bin, "postgres"),
		"-D", s.dataDir(),
		"-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
	)
	cmd.Dir = s.base
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The kernel kills the server if the test binary dies without stopping
	// it (see spawn for why that holds for the whole process).
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	p, err := spawn(cmd)
	if err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	if err := s.waitReady(ctx, p); err != nil {
		p.kill()
		return fmt.Errorf("pgtest: postgres on port %d: %w\n%s", s.port, err, s.logSince(logStart))
	}
	s.proc = p
	return nil
}

// waitReady polls the server until it accepts a connection, the process
// exits, or ctx ends.
func (s *Server) waitReady(ctx context.Context, p *process) error {
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgconn.Connect(attemptCtx, s.URL())
		cancel()
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before accepting connections: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last error: %v)", ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

// Stop shuts the server down (fast shutdown: sessions are disconnected) and
// waits for it to exit; at ctx's deadline it is killed. Stopping a stopped
// server does nothing.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil && !p.exited() {
		p.kill()
		return fmt.Errorf("pgtest: stop postgres: %w", err)
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("pgtest: stop postgres: %w", ctx.Err())
	}
}

// remove stops the server and deletes its directory.
func (s *Server) remove(ctx context.Context) error {
	err := s.Stop(ctx)
	return errors.Join(err, os.RemoveAll(s.base))
}

// logSince returns the server's log from offset on, for error messages.
func (s *Server) logSince(offset int64) string {
	b, err := os.ReadFile(s.logPath())
	if err != nil || offset > int64(len(b)) {
		return ""
	}
	b = b[offset:]
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(bytes.TrimSpace(b))
}

// spawn starts cmd from a goroutine locked to its OS thread, which then
// waits for the process. The parent death signal is tied to the thread that
// forked the child, not to the process, so that thread must live exactly as
// long as the child: the goroutine holds it until Wait returns.
func spawn(cmd *exec.Cmd) (*process, error) {
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(p.done)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
	}()
	if err := <-started; err != nil {
		<-p.done
		return nil, err
	}
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *process) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Kill() // an error means it already exited
	}
	<-p.done
}

// errNoPostgres is the failure when PostgreSQL is not installed.
var errNoPostgres = errors.New("pgtest: initdb and postgres not found in PATH nor /usr/lib/postgresql/*/bin: install postgresql: run scripts/deps.sh")

// findBinaries returns the directory holding initdb and postgres: the one in
// PATH, else the highest version under /usr/lib/postgresql.
func findBinaries() (string, error) {
	if initdb, err := exec.LookPath("initdb"); err == nil {
		if pg, err := exec.LookPath("postgres"); err == nil && filepath.Dir(initdb) == filepath.Dir(pg) {
			return filepath.Dir(initdb), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, dir := range dirs {
		if isFile(filepath.Join(dir, "initdb")) && isFile(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", errNoPostgres
}

// versionOf reads the major version out of /usr/lib/postgresql/<v>/bin.
func versionOf(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// credential returns who the server runs as. PostgreSQL refuses to run as
// root, so as root it runs as the postgres user if there is one, else as
// nobody; otherwise as the current user (nil).
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
	}
	return nil, errors.New("pgtest: running as root and neither user postgres nor nobody exists to run PostgreSQL")
}

// childEnv is the environment of initdb and postgres: the parent's, with a
// locale that always exists and no PG* variables that could redirect them.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C", "LANG=C")
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
