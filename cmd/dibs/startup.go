package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/store/sqlite"
	"github.com/dibsio/dibs/stream"
)

// The checks dibs serve runs before it starts anything.

// unusedClient is a Redis client that is never called.
type unusedClient struct{ rueidis.Client }

// checkStreamConfig reports a `stream:` setting that cannot work. The
// stream package checks its Config when a registry is made; a registry over
// a client it never calls does that without Redis.
func checkStreamConfig(cfg stream.Config) error {
	_, err := stream.NewRegistry(unusedClient{}, "check", cfg)
	return err
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
