package redisserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults for Options and for calls whose context has no deadline.
const (
	// DefaultBinary is the redis-server executable looked up in PATH.
	DefaultBinary = "redis-server"
	// DefaultAppendFsync is the append-only file fsync policy.
	DefaultAppendFsync = "everysec"
	// DefaultStartTimeout bounds Start and Restart when their context has no
	// deadline. Loading a large append-only file takes a while, hence generous.
	DefaultStartTimeout = 60 * time.Second
	// DefaultStopTimeout is how long Stop waits for a graceful shutdown when
	// its context has no deadline, before it kills the child.
	DefaultStopTimeout = 10 * time.Second
	// DefaultClusterNodeTimeout is the cluster-node-timeout of Cluster nodes.
	DefaultClusterNodeTimeout = 5 * time.Second
	// LockFile is the name of the lock file Options.Lock takes in Dir.
	LockFile = "dibs.lock"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNotInstalled means the redis-server binary was not found.
	ErrNotInstalled = errors.New("redis-server is not installed: install it with " +
		"`apt-get install redis-server` (Debian/Ubuntu) or `brew install redis` (macOS), " +
		"or pass --redis to use a Redis you run yourself")
	// ErrLocked means another server, in this process or another one, holds
	// the lock on the data directory.
	ErrLocked = errors.New("redis data directory is locked by another running server")
)

// startAttempts is how often Start tries fresh ports when the one it picked
// was taken between choosing it and redis-server binding it.
const startAttempts = 5

// Options configure a Server. The zero value is usable: a throw-away server
// in a temporary directory on a free port with AOF everysec.
type Options struct {
	// Binary is the redis-server executable, a path or a name looked up in
	// PATH. Defaults to "redis-server".
	Binary string
	// Dir is the data directory (append-only files, nodes.conf, lock file);
	// it is created if missing. Defaults to a new temporary directory that
	// Stop removes.
	Dir string
	// Port is the TCP port on 127.0.0.1. Defaults to a free port picked at
	// Start and kept by Restart.
	Port int
	// AppendFsync is the durability of the append-only file: "always",
	// "everysec", "no", or "off" for no persistence at all (no AOF, no RDB).
	// Defaults to "everysec".
	AppendFsync string
	// Cluster starts the server with cluster-enabled yes, as a member of a
	// Redis Cluster still to be formed; its cluster bus gets its own free port.
	// Defaults to false.
	Cluster bool
	// Lock takes an exclusive flock on Dir/dibs.lock for the life of the
	// server, so a second Start on the same Dir fails with ErrLocked.
	// Defaults to false.
	Lock bool
	// Log receives redis-server's standard output and error. The last lines
	// are kept either way for error messages. Defaults to discarding.
	Log io.Writer
	// Args are extra redis-server arguments appended after the ones the
	// server sets itself, e.g. []string{"--maxmemory", "64mb"}.
	// Defaults to none.
	Args []string
}

func (o Options) withDefaults() Options {
	if o.Binary == "" {
		o.Binary = DefaultBinary
	}
	if o.AppendFsync == "" {
		o.AppendFsync = DefaultAppendFsync
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

func (o Options) validate() error {
	switch o.AppendFsync {
	case "always", "everysec", "no", "off":
	default:
		return fmt.Errorf("redisserver: Options.AppendFsync %q: want always, everysec, no or off", o.AppendFsync)
	}
	if o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("redisserver: Options.Port %d: out of range", o.Port)
	}
	return nil
}

// Server is a redis-server child process. Its methods are safe for concurrent
// use; Stop, Kill and Restart are serialised.
type Server struct {
	o       Options // with defaults; read-only after Start
	binary  string  // resolved path of the executable
	dir     string  // absolute data directory
	tempDir bool    // dir was made by Start and is removed by Stop
	port    int     // client port, fixed after Start
	cport   int     // cluster bus port (Cluster only), fixed after Start
	tail    *tailWriter

	mu      sync.Mutex // guards the fields below and serialises Stop, Kill, Restart
	lock    *os.File   // held flock on dir/LockFile, nil without Options.Lock
	child   *child     // the current process; nil before start or after Kill
	stopped bool       // Stop ran; lock released, temp dir removed
}

// Start starts a redis-server and returns once it answers PING. The context
// bounds the start (DefaultStartTimeout if it has no deadline); it does not
// bound the life of the server, which runs until Stop or Kill.
func Start(ctx context.Context, o Options) (*Server, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("redisserver: %w (%v)", ErrNotInstalled, err)
	}
	s := &Server{o: o, binary: bin, tail: newTailWriter(8 << 10)}
	if err := s.prepareDir(); err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx, DefaultStartTimeout)
	defer cancel()

	attempts := 1
	if o.Port == 0 {
		attempts = startAttempts
	}
	for range attempts {
		s.port, s.cport = o.Port, 0
		if err = s.pickPorts(); err != nil {
			break
		}
		err = s.launch(ctx)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errAddrInUse) || ctx.Err() != nil {
			break
		}
	}
	s.release()
	return nil, err
}

// prepareDir creates the data directory (or a temporary one) and takes the
// lock when asked.
func (s *Server) prepareDir() error {
	if s.o.Dir == "" {
		if s.dir == "" || !s.tempDir {
			d, err := os.MkdirTemp("", "dibs-redis-")
			if err != nil {
				return fmt.Errorf("redisserver: create temp dir: %w", err)
			}
			s.dir, s.tempDir = d, true
		} else if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return fmt.Errorf("redisserver: create dir: %w", err)
		}
	} else {
		d, err := filepath.Abs(s.o.Dir)
		if err != nil {
			return fmt.Errorf("redisserver: dir %q: %w", s.o.Dir, err)
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("redisserver: create dir: %w", err)
		}
		s.dir = d
	}
	if s.o.Lock {
		f, err := lockDir(s.dir)
		if err != nil {
			s.release()
			return err
		}
		s.lock = f
	}
	return nil
}

// release drops the lock and removes a temporary directory.
func (s *Server) release() {
	if s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
	if s.tempDir && s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// pickPorts chooses free loopback ports for the fields still zero.
func (s *Server) pickPorts() error {
	need := 0
	if s.port == 0 {
		need++
	}
	if s.o.Cluster && s.cport == 0 {
		need++
	}
	ports, err := freePorts(need)
	if err != nil {
		return fmt.Errorf("redisserver: pick a free port: %w", err)
	}
	if s.port == 0 {
		s.port, ports = ports[0], ports[1:]
	}
	if s.o.Cluster && s.cport == 0 {
		s.cport = ports[0]
	}
	return nil
}

// freePorts returns n distinct ports the kernel considered free a moment ago.
// All listeners stay open until every port is chosen, so they differ.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (s *Server) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--protected-mode", "yes",
		"--daemonize", "no",
		"--dir", s.dir,
		"--save", "",
		"--logfile", "",
	}
	if s.o.AppendFsync == "off" {
		a = append(a, "--appendonly", "no")
	} else {
		a = append(a, "--appendonly", "yes", "--appendfsync", s.o.AppendFsync)
	}
	if s.o.Cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(s.cport),
			"--cluster-node-timeout", strconv.FormatInt(DefaultClusterNodeTimeout.Milliseconds(), 10),
		)
	}
	return append(a, s.o.Args...)
}

// errAddrInUse marks a start that failed because a port was taken.
var errAddrInUse = errors.New("address already in use")

// launch starts the child and waits until it answers PING. On failure the
// child is killed and reaped.
func (s *Server) launch(ctx context.Context) error {
	cmd := exec.Command(s.binary, s.args()...)
	cmd.Dir = s.dir
	out := io.MultiWriter(s.tail, s.o.Log)
	cmd.Stdout, cmd.Stderr = out, out
	if s.lock != nil {
		// The child holds the lock too: it stays held until both are gone.
		cmd.ExtraFiles = []*os.File{s.lock}
	}
	// A grandchild (an AOF rewrite) may keep the output pipe open after
	// redis-server itself died; don't let that hold up Wait.
	cmd.WaitDelay = 2 * time.Second
	setDeathSignal(cmd)

	c, err := spawn(cmd)
	if err != nil {
		return fmt.Errorf("redisserver: start %s: %w", s.binary, err)
	}
	if err := waitReady(ctx, s.Addr(), c.done); err != nil {
		c.kill()
		tail := s.tail.String()
		if strings.Contains(tail, "Address already in use") {
			err = fmt.Errorf("%w: %w", errAddrInUse, err)
		}
		return fmt.Errorf("redisserver: redis-server on %s not ready: %w; log tail:\n%s", s.Addr(), err, tail)
	}
	s.child = c
	return nil
}

// Addr returns the client address, "127.0.0.1:PORT". It stays the same
// across Restart.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// ClusterPort returns the port of the cluster bus (the port other Cluster
// nodes are told in CLUSTER MEET), or 0 without Options.Cluster.
func (s *Server) ClusterPort() int { return s.cport }

// Dir returns the absolute data directory.
func (s *Server) Dir() string { return s.dir }

// PID returns the process id of the running redis-server, or 0 if none runs.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.child == nil || s.child.exited() {
		return 0
	}
	return s.child.cmd.Process.Pid
}

// Exited returns a channel closed when the current redis-server process
// exits, whether by Stop, Kill or a crash; it is already closed if none runs.
// After Restart, ask again: the new process has a new channel.
func (s *Server) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.child == nil {
		return closedChan
	}
	return s.child.done
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// LogTail returns the last lines redis-server wrote, for error messages.
func (s *Server) LogTail() string { return s.tail.String() }

// Stop shuts the server down gracefully (SIGTERM, which redis-server treats
// like SHUTDOWN: the append-only file is flushed), waits for it to exit, and
// kills it if it is still running at the context's deadline
// (DefaultStopTimeout if none), returning the context's error. It then
// releases the lock and removes a temporary Dir. Stop is idempotent.
func (s *Server) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	err := s.stopChild(ctx)
	s.release()
	s.stopped = true
	return err
}

func (s *Server) stopChild(ctx context.Context) error {
	c := s.child
	s.child = nil
	if c == nil || c.exited() {
		return nil
	}
	ctx, cancel := withDefaultTimeout(ctx, DefaultStopTimeout)
	defer cancel()
	if err := c.signalTerm(); err != nil {
		c.kill()
		return nil
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		c.kill()
		return fmt.Errorf("redisserver: redis-server on %s did not stop in time and was killed: %w", s.Addr(), ctx.Err())
	}
}

// Kill sends SIGKILL to the server at once and waits for it to exit, as a
// crash would. The data directory and lock are kept, for Restart.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.child != nil {
		s.child.kill()
		s.child = nil
	}
	return nil
}

// Restart starts the server again on the same Dir and Port and waits until it
// answers PING, bounded by ctx (DefaultStartTimeout if it has no deadline).
// A running server is stopped first. After Stop, the lock is taken again and
// a temporary Dir is recreated empty.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stopChild(ctx); err != nil {
		return err
	}
	if s.stopped {
		if err := s.prepareDir(); err != nil {
			return err
		}
		s.stopped = false
	}
	ctx, cancel := withDefaultTimeout(ctx, DefaultStartTimeout)
	defer cancel()
	return s.launch(ctx)
}

func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
