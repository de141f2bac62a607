//go:build unix

package redisserver_test

import (
	"bufio"
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
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/dibsio/dibs/internal/redisserver"
)

// parentEnv makes the test binary act as a parent process that starts a
// redis-server, prints its pid and waits to be killed.
const parentEnv = "DIBS_REDISSERVER_TEST_PARENT"

func TestMain(m *testing.M) {
	if os.Getenv(parentEnv) == "1" {
		os.Exit(runParent())
	}
	goleak.VerifyTestMain(m)
}

func runParent() int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := redisserver.Start(ctx, redisserver.Options{AppendFsync: "off"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("pid %d\n", s.PID())
	// Wait until the test closes stdin or, as intended, kills this process.
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = s.Stop(ctx)
	return 0
}

// start starts a server stopped at the end of the test.
func start(t *testing.T, o redisserver.Options) *redisserver.Server {
	t.Helper()
	s, err := redisserver.Start(t.Context(), o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

func client(t *testing.T, s *redisserver.Server) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{s.Addr()},
		DisableCache:      true,
		ForceSingleClient: true,
	})
	if err != nil {
		t.Fatalf("connect %s: %v", s.Addr(), err)
	}
	t.Cleanup(c.Close)
	return c
}

func do(t *testing.T, c rueidis.Client, want string, cmd rueidis.Completed) {
	t.Helper()
	got, err := c.Do(t.Context(), cmd).ToString()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Commands(), err)
	}
	if got != want {
		t.Fatalf("%v = %q, want %q", cmd.Commands(), got, want)
	}
}

func TestStartPingStop(t *testing.T) {
	t.Parallel()
	s, err := redisserver.Start(t.Context(), redisserver.Options{AppendFsync: "off", Args: []string{"--databases", "4"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Errorf("Addr = %q, want loopback", s.Addr())
	}
	if s.PID() == 0 {
		t.Error("PID = 0 for a running server")
	}
	// Its own process group: a terminal's Ctrl-C is for the parent alone.
	if pgid, err := syscall.Getpgid(s.PID()); err != nil || pgid == syscall.Getpgrp() {
		t.Errorf("child process group %d (%v), parent's %d", pgid, err, syscall.Getpgrp())
	}
	dir := s.Dir()
	c := client(t, s)
	do(t, c, "PONG", c.B().Ping().Build())
	do(t, c, "OK", c.B().Set().Key("k").Value("v").Build())
	do(t, c, "v", c.B().Get().Key("k").Build())
	cfg, err := c.Do(t.Context(), c.B().ConfigGet().Parameter("appendonly").Build()).AsStrMap()
	if err != nil || cfg["appendonly"] != "no" {
		t.Errorf("appendonly = %v (%v), want no for AppendFsync off", cfg, err)
	}
	cfg, err = c.Do(t.Context(), c.B().ConfigGet().Parameter("save").Build()).AsStrMap()
	if err != nil || cfg["save"] != "" {
		t.Errorf("save = %v (%v), want empty", cfg, err)
	}
	cfg, err = c.Do(t.Context(), c.B().ConfigGet().Parameter("databases").Build()).AsStrMap()
	if err != nil || cfg["databases"] != "4" {
		t.Errorf("databases = %v (%v), want 4 from Options.Args", cfg, err)
	}

	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if s.PID() != 0 {
		t.Errorf("PID = %d after Stop", s.PID())
	}
	if conn, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Stop", s.Addr())
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp dir %s not removed by Stop: %v", dir, err)
	}
	if err := s.Kill(); err != nil {
		t.Errorf("Kill after Stop: %v", err)
	}
}

func TestKillRestartKeepsAOF(t *testing.T) {
	t.Parallel()
	s := start(t, redisserver.Options{AppendFsync: "always"})
	addr, pid := s.Addr(), s.PID()
	c := client(t, s)
	do(t, c, "OK", c.B().Set().Key("survivor").Value("yes").Build())

	exited := s.Exited()
	select {
	case <-exited:
		t.Fatal("Exited closed for a running server")
	default:
	}
	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	select {
	case <-exited:
	default:
		t.Fatal("Exited not closed after Kill")
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("redis-server pid %d still exists after Kill: %v", pid, err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "appendonlydir")); err != nil {
		t.Fatalf("no multi-part AOF dir: %v", err)
	}
	if err := s.Restart(t.Context()); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.Addr() != addr {
		t.Errorf("Addr changed on Restart: %s -> %s", addr, s.Addr())
	}
	if s.PID() == pid || s.PID() == 0 {
		t.Errorf("PID after Restart = %d, before %d", s.PID(), pid)
	}
	c = client(t, s)
	do(t, c, "yes", c.B().Get().Key("survivor").Build())
}

func TestRestartRunningAndAfterStop(t *testing.T) {
	t.Parallel()
	s := start(t, redisserver.Options{Dir: t.TempDir(), Lock: true})
	c := client(t, s)
	cfg, err := c.Do(t.Context(), c.B().ConfigGet().Parameter("append*").Build()).AsStrMap()
	if err != nil || cfg["appendonly"] != "yes" || cfg["appendfsync"] != "everysec" {
		t.Errorf("default AOF config = %v (%v), want appendonly yes, appendfsync everysec", cfg, err)
	}
	do(t, c, "OK", c.B().Set().Key("a").Value("1").Build())
	// A running server is stopped gracefully first: everysec loses nothing.
	if err := s.Restart(t.Context()); err != nil {
		t.Fatalf("Restart running: %v", err)
	}
	// Connections made before a restart are closed; start over.
	c = client(t, s)
	do(t, c, "1", c.B().Get().Key("a").Build())
	do(t, c, "OK", c.B().Set().Key("b").Value("2").Build())
	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := s.Restart(t.Context()); err != nil {
		t.Fatalf("Restart after Stop: %v", err)
	}
	c = client(t, s)
	do(t, c, "2", c.B().Get().Key("b").Build())
	// The lock was taken again.
	if _, err := redisserver.Start(t.Context(), redisserver.Options{Dir: s.Dir(), Lock: true}); !errors.Is(err, redisserver.ErrLocked) {
		t.Fatalf("Start on a restarted locked Dir: %v, want ErrLocked", err)
	}
}

func TestLockedDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := redisserver.Start(t.Context(), redisserver.Options{Dir: dir, Lock: true})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	_, err = redisserver.Start(t.Context(), redisserver.Options{Dir: dir, Lock: true})
	if !errors.Is(err, redisserver.ErrLocked) {
		t.Fatalf("second Start: %v, want ErrLocked", err)
	}
	// The child holds the lock as well, so it outlives a parent killed first.
	if _, err := os.Stat("/proc/self/fd"); err == nil {
		fds, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(s.PID()), "fd", "*"))
		held := false
		for _, fd := range fds {
			if l, _ := os.Readlink(fd); l == filepath.Join(dir, redisserver.LockFile) {
				held = true
			}
		}
		if !held {
			t.Errorf("redis-server has no descriptor of %s", redisserver.LockFile)
		}
	}
	// After Kill the lock is still held: Restart must find the Dir its own.
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	_, err = redisserver.Start(t.Context(), redisserver.Options{Dir: dir, Lock: true})
	if !errors.Is(err, redisserver.ErrLocked) {
		t.Fatalf("Start after Kill: %v, want ErrLocked", err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	s2 := start(t, redisserver.Options{Dir: dir, Lock: true})
	if s2.Dir() != dir {
		t.Errorf("Dir = %q, want %q", s2.Dir(), dir)
	}
}

func TestNotInstalled(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{"/nonexistent/redis-server", "dibs-no-such-redis-server"} {
		t.Run(bin, func(t *testing.T) {
			t.Parallel()
			_, err := redisserver.Start(t.Context(), redisserver.Options{Binary: bin})
			if !errors.Is(err, redisserver.ErrNotInstalled) {
				t.Fatalf("Start: %v, want ErrNotInstalled", err)
			}
			if !strings.Contains(err.Error(), "apt-get install redis-server") {
				t.Errorf("error %q does not say how to install", err)
			}
		})
	}
}

func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		o     redisserver.Options
		field string
	}{
		{"fsync", redisserver.Options{AppendFsync: "sometimes"}, "AppendFsync"},
		{"port", redisserver.Options{Port: 70000}, "Port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := redisserver.Start(t.Context(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Start: %v, want an error naming %s", err, tc.field)
			}
		})
	}
}

func TestFixedPortTaken(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = redisserver.Start(t.Context(), redisserver.Options{Port: port, AppendFsync: "off"})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Start on a taken port: %v, want address in use with the log tail", err)
	}
}

func TestExitedOnCrash(t *testing.T) {
	t.Parallel()
	s := start(t, redisserver.Options{AppendFsync: "off"})
	// Something other than Stop or Kill ends the process.
	if err := syscall.Kill(s.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("Exited not closed after the process died")
	}
	if s.PID() != 0 {
		t.Errorf("PID = %d after a crash", s.PID())
	}
	if err := s.Restart(t.Context()); err != nil {
		t.Fatalf("Restart after a crash: %v", err)
	}
	c := client(t, s)
	do(t, c, "PONG", c.B().Ping().Build())
}

func TestStopKillsAtDeadline(t *testing.T) {
	t.Parallel()
	s := start(t, redisserver.Options{AppendFsync: "off"})
	pid := s.PID()
	// A stopped process cannot act on SIGTERM, only die of SIGKILL.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := s.Stop(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop of a stuck server: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("Stop took %v", d)
	}
	if alive(pid) {
		t.Errorf("pid %d alive after Stop", pid)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestChildDiesWithParent(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("needs /proc")
	}
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), parentEnv+"=1")
	stdin, err := parent.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	parent.Stderr = os.Stderr
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		parent.Process.Kill()
		parent.Wait()
		t.Fatalf("read pid from parent: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
	if err != nil || pid <= 0 {
		parent.Process.Kill()
		parent.Wait()
		t.Fatalf("parent printed %q", line)
	}
	if comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); !strings.HasPrefix(string(comm), "redis-server") || !alive(pid) {
		t.Fatalf("pid %d is %q, want a live redis-server", pid, comm)
	}

	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	parent.Wait()

	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for alive(pid) {
		select {
		case <-tick.C:
		case <-deadline:
			syscallKill(pid)
			t.Fatalf("redis-server pid %d survived its parent's SIGKILL", pid)
		}
	}
}

func syscallKill(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
