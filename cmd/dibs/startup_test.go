package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// TestServeRefusesBadInputFirst: each bad input stops dibs serve with exit 1
// and a one-line reason before it starts anything: no redis-server, no data
// directory, no database file.
func TestServeRefusesBadInputFirst(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	aFile := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		config string
		env    []string
		want   string
	}{
		{name: "bad db scheme", args: []string{"--db", "mysql://db/dibs"}, want: `unsupported database URL scheme "mysql"`},
		{name: "bad sqlite url", args: []string{"--db", "sqlite://x.db?cache=none"}, want: `unknown URL parameter "cache"`},
		{name: "no database directory", args: []string{"--db", "sqlite:///nonexistent-dibs-dir/dibs.db"}, want: "/nonexistent-dibs-dir/dibs.db"},
		{name: "busy port", args: []string{"--addr", busy.Addr().String()}, want: "listen on " + busy.Addr().String()},
		{name: "bad redis url", args: []string{"--redis", "http://redis"}, want: "--redis: unsupported scheme"},
		{name: "bad stream value", config: "stream:\n  batch_size: -1\n", want: "stream.batch_size must be at least 1, got -1"},
		{name: "zero stream value", config: "stream:\n  batch_size: 0\n", want: "stream.batch_size must be at least 1, got 0"},
		{name: "empty admin token variable", env: []string{"DIBS_ADMIN_TOKEN="}, want: "DIBS_ADMIN_TOKEN is set but empty"},
		{name: "empty room secret variable", env: []string{"DIBS_WAITROOM_SECRET="}, want: "DIBS_WAITROOM_SECRET is set but empty"},
		{name: "empty database variable", env: []string{"DIBS_DATABASE_URL="}, want: "DIBS_DATABASE_URL is set but empty"},
		{name: "placeholder admin token variable", env: []string{"DIBS_ADMIN_TOKEN=change-me"}, want: `DIBS_ADMIN_TOKEN holds the placeholder "change-me"`},
		{name: "placeholder room secret", env: []string{"DIBS_WAITROOM_SECRET=k1:change-me"}, want: `DIBS_WAITROOM_SECRET holds the placeholder "change-me"`},
		{name: "empty admin token flag", args: []string{"--admin-token="}, want: "--admin-token is empty"},
		{name: "placeholder admin token flag", args: []string{"--admin-token", "change-me"}, want: `--admin-token is the placeholder "change-me"`},
		{name: "bad http value", config: "http:\n  max_conns: -5\n", want: "http.max_conns must not be negative"},
		{name: "unknown key", config: "http:\n  max_con: 5\n", want: "max_con"},
		{name: "data dir is a file", args: []string{"--data-dir", aFile}, want: aFile + " is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			dataDir := filepath.Join(dir, "data")
			dbFile := filepath.Join(dir, "dibs.db")
			args := []string{"serve", "--addr", "127.0.0.1:0", "--redis=", "--db", "sqlite://" + dbFile,
				"--data-dir", dataDir, "--admin-token", "t"}
			if tt.config != "" {
				cfg := filepath.Join(dir, "dibs.yaml")
				if err := os.WriteFile(cfg, []byte(tt.config), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", cfg)
			}
			// Later flags win, so a case's own flags override the defaults above.
			r := runDibs(t, append([]string{"DIBS_CONFIG="}, tt.env...), append(args, tt.args...)...)
			if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("want exit 1 and %q, got:\n%s", tt.want, r)
			}
			if lines := strings.Count(strings.TrimSpace(r.stderr), "\n") + 1; lines != 1 {
				t.Errorf("the reason is not one line:\n%s", r)
			}
			for _, p := range []string{dataDir, dbFile} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s was left behind (%v):\n%s", p, err, r)
				}
			}
		})
	}
}

// TestSecondServeOnSameDatabase: a second dibs serve on a SQLite database
// that a running one uses is refused at start, naming the file, before it
// starts its own redis-server.
func TestSecondServeOnSameDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "shared.db")
	first := startServe(t, redistest.Single(t).Addr(), "sqlite://"+dbPath)

	dataDir := filepath.Join(dir, "second-data")
	r := runDibs(t, []string{"DIBS_CONFIG="}, "serve", "--addr", "127.0.0.1:0", "--redis=",
		"--db", "sqlite://"+dbPath, "--data-dir", dataDir, "--admin-token", "t")
	if r.code != 1 || !strings.Contains(r.stderr, "another dibs process holds the lock on "+dbPath) {
		t.Fatalf("second serve on %s: want exit 1 naming the file, got:\n%s", dbPath, r)
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Fatalf("the refused serve made its data directory (%v)", err)
	}
	// The first one still serves.
	if a, err := call(first.Addr, "GET", "/readyz", ""); err != nil || a.status != 200 {
		t.Fatalf("the first serve after the refusal: %+v %v", a, err)
	}
	// Once it is gone, the database is free again.
	first.Kill()
	again := startServe(t, redistest.Single(t).Addr(), "sqlite://"+dbPath)
	again.Kill()
}

// fakeOldRedis answers like a Redis 6.2 on a free loopback port: enough of
// RESP2 for a client to connect, PING, and read INFO server.
func fakeOldRedis(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	serveConn := func(c net.Conn) {
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			args, err := readRESPArray(r)
			if err != nil {
				return
			}
			var reply string
			switch strings.ToUpper(args[0]) {
			case "HELLO":
				reply = "-ERR unknown command 'HELLO'\r\n"
			case "CLUSTER":
				reply = "-ERR This instance has cluster support disabled\r\n"
			case "PING":
				reply = "+PONG\r\n"
			case "INFO":
				info := "# Server\r\nredis_version:6.2.14\r\nredis_mode:standalone\r\n"
				reply = fmt.Sprintf("$%d\r\n%s\r\n", len(info), info)
			default:
				reply = "+OK\r\n"
			}
			if _, err := io.WriteString(c, reply); err != nil {
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				serveConn(c)
			}()
		}
	}()
	return l.Addr().String()
}

// readRESPArray reads one command: an array of bulk strings.
func readRESPArray(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("not a command: %q", line)
	}
	args := make([]string, n)
	for i := range args {
		head, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
		if err != nil {
			return nil, fmt.Errorf("not a bulk string: %q", head)
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// TestServeRefusesOldRedis: a Redis older than 7.0 stops dibs serve at
// start with a one-line reason naming the version.
func TestServeRefusesOldRedis(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runDibs(t, []string{"DIBS_CONFIG="}, "serve", "--addr", "127.0.0.1:0", "--redis", "redis://"+fakeOldRedis(t),
		"--db", "sqlite://"+filepath.Join(dir, "dibs.db"), "--admin-token", "t")
	if r.code != 1 || !strings.Contains(r.stderr, "6.2.14") || !strings.Contains(r.stderr, "too old") {
		t.Fatalf("want exit 1 naming the old version, got:\n%s", r)
	}
}
