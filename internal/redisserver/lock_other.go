//go:build !unix

package redisserver

import (
	"errors"
	"os"
)

// lockDir is not supported without flock.
func lockDir(dir string) (*os.File, error) {
	return nil, errors.New("redisserver: Options.Lock is not supported on this OS")
}

// LockPath is not supported without flock.
func LockPath(path string) (*os.File, error) {
	return nil, errors.New("redisserver: file locks are not supported on this OS")
}
