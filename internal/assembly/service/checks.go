package service

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/store/sqlite"
	"github.com/dibsio/dibs/stream"
)

// The checks the service runs before it starts anything, and the small
// parsers they share.

// unusedClient is a Redis client that is never called.
type unusedClient struct{ rueidis.Client }

// checkStreamConfig reports a `stream:` setting that cannot work, by its
// YAML key. The
// stream package checks its Config when a registry is made; a registry over
// a client it never calls does that without Redis.
func checkStreamConfig(cfg stream.Config) error {
	_, err := stream.NewRegistry(unusedClient{}, "check", cfg)
	return inFileTerms("stream", streamKeys, err)
}

// The keep-alive of the service's Redis connections. rueidis PINGs every
// connection that was idle for Dialer.KeepAlive, 1 s by default: that alone
// would have an idle instance send Redis a few commands a second. Once a
// minute keeps an idle instance near silent (docs/tuning.md), and a
// command still fails once it waited redisWriteTimeout for its reply (the
// rueidis default with a 1 s keep-alive), so a dead connection is found by
// the next command that uses it.
const (
	redisKeepAlive    = time.Minute
	redisWriteTimeout = 10 * time.Second
)

// quietIdle sets opt's keep-alive and write timeout where the URL set none.
func quietIdle(opt *rueidis.ClientOption) {
	if opt.Dialer.KeepAlive == 0 {
		opt.Dialer.KeepAlive = redisKeepAlive
	}
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = redisWriteTimeout
	}
}

// The pipelining of the service's Redis client. Concurrent commands share
// a connection's writes (rueidis' auto-pipelining), so the fewer the
// connections, the more claims Redis reads and answers in one go: one
// connection to each Redis server (rueidis' PipelineMultiplex of -1; its
// default on a single server is 2^min(2, log2(GOMAXPROCS)) connections).
// One connection carries far more commands a second than the Redis
// server behind it can run. The writer does not pause after a write to
// collect more (rueidis' MaxFlushDelay of 0): a Go timer that short sleeps
// far longer on a busy host. See docs/tuning.md, "Redis connection".
const (
	redisFlushDelay = 0
	redisMultiplex  = -1
)

// pipelining sets opt's flush delay and connection count: the URL's
// max_flush_delay and pipeline_multiplex query parameters, else the
// service's defaults.
func pipelining(opt *rueidis.ClientOption, q url.Values) error {
	opt.MaxFlushDelay, opt.PipelineMultiplex = redisFlushDelay, redisMultiplex
	if v := q.Get("max_flush_delay"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Millisecond {
			return fmt.Errorf("--redis: max_flush_delay must be a duration from 0 to 1ms, got %q", v)
		}
		opt.MaxFlushDelay = d
	}
	if v := q.Get("pipeline_multiplex"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < -1 || n > rueidis.MaxPipelineMultiplex {
			return fmt.Errorf("--redis: pipeline_multiplex must be an integer from -1 to %d, got %q", rueidis.MaxPipelineMultiplex, v)
		}
		opt.PipelineMultiplex = n
	}
	return nil
}

// redisOptions parses --redis: a redis:// or rediss:// URL, or a comma list
// of host:port seeds (Redis Cluster). Empty means the embedded server.
func redisOptions(s string) ([]string, rueidis.ClientOption, error) {
	opt := rueidis.ClientOption{DisableCache: true}
	quietIdle(&opt)
	_ = pipelining(&opt, nil)
	switch {
	case s == "":
		return nil, opt, nil
	case strings.HasPrefix(s, "redis://"), strings.HasPrefix(s, "rediss://"), strings.HasPrefix(s, "unix://"):
		o, err := rueidis.ParseURL(s)
		if err != nil {
			return nil, opt, fmt.Errorf("--redis: %w", err)
		}
		o.DisableCache = true
		quietIdle(&o)
		u, _ := url.Parse(s) // parsed by rueidis.ParseURL above
		if err := pipelining(&o, u.Query()); err != nil {
			return nil, opt, err
		}
		return o.InitAddress, o, nil
	case strings.Contains(s, "://"):
		return nil, opt, fmt.Errorf("--redis: unsupported scheme in %q (want redis://, rediss:// or host:port list)", s)
	}
	addrs := strings.Split(s, ",")
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(strings.TrimSpace(a)); err != nil {
			return nil, opt, fmt.Errorf("--redis: %q is not host:port", a)
		}
	}
	opt.InitAddress = addrs
	return addrs, opt, nil
}

// failpoint returns the crash hook named by spec (see Config.Failpoint).
// Empty means no failpoint.
func failpoint(spec string) (func(issued int), error) {
	if spec == "" {
		return func(int) {}, nil
	}
	name, arg, _ := strings.Cut(spec, ":")
	n, err := strconv.Atoi(arg)
	if name != "crash-after-commit" || err != nil || n < 1 {
		return nil, fmt.Errorf("DIBS_FAILPOINT: unknown failpoint %q (want crash-after-commit:N)", spec)
	}
	var total atomic.Int64
	return func(issued int) {
		if total.Add(int64(issued)) >= int64(n) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way; never reach the acknowledgement
		}
	}, nil
}

// checkDataDir reports a data directory the embedded redis-server could not
// use: a path that is not a directory, or none that could be made because
// its nearest existing parent is not a writable directory. It creates
// nothing.
func checkDataDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, os.ErrNotExist) && p != filepath.Dir(p):
			continue // made on start, if its parent allows
		case err != nil:
			return fmt.Errorf("--data-dir %s: %w", dir, err)
		case !fi.IsDir():
			return fmt.Errorf("--data-dir %s: %s is not a directory", dir, p)
		}
		if err := syscall.Access(p, 0x2|0x1); err != nil { // W_OK|X_OK
			return fmt.Errorf("--data-dir %s: %s is not writable: %w", dir, p, err)
		}
		return nil
	}
}

// lockDatabase takes an exclusive lock on a SQLite database file for the
// life of the process (released by the returned function), so that two dibs
// processes never confirm claims into one file from two Redis servers. The
// file is created if it does not exist, which also checks that its directory
// is usable. Other databases need no lock: every instance shares them.
func lockDatabase(dbURL string) (release func(), err error) {
	if !strings.HasPrefix(strings.ToLower(dbURL), "sqlite://") {
		return func() {}, nil
	}
	cfg, err := sqlite.ParseURL(dbURL)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", dbURL, err)
	}
	if cfg.Path == ":memory:" || strings.HasPrefix(cfg.Path, "file:") {
		return func() {}, nil
	}
	f, err := redisserver.LockPath(cfg.Path)
	if errors.Is(err, redisserver.ErrLocked) {
		return nil, fmt.Errorf("database %s is in use: another dibs process holds the lock on %s; stop it or give this one its own database", dbURL, cfg.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", dbURL, err)
	}
	return func() { _ = f.Close() }, nil
}

// RedactURL hides a password in a database URL.
func RedactURL(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			cred := rest[:at]
			if c := strings.Index(cred, ":"); c >= 0 {
				return s[:i+3] + cred[:c] + ":***" + rest[at:]
			}
		}
	}
	return s
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
