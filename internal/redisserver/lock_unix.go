//go:build unix

package redisserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive, non-blocking flock on dir/LockFile. The lock
// belongs to the open file description, so it is held while any copy of the
// returned descriptor is open, in this process or in the child.
func lockDir(dir string) (*os.File, error) {
	return LockPath(filepath.Join(dir, LockFile))
}

// LockPath takes an exclusive, non-blocking flock on the file at path,
// creating it if needed, and returns the open file that holds the lock until
// it is closed. A file another open file description holds locked, in this
// process or another, fails with an error that wraps ErrLocked.
func LockPath(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("redisserver: open lock file: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("redisserver: %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("redisserver: lock %s: %w", path, err)
	}
	return f, nil
}
