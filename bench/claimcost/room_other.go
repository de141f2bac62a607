//go:build !linux

package main

import (
	"errors"
	"io"
)

// roomCmd needs Linux: its streams are read through epoll.
func roomCmd([]string, io.Writer) error {
	return errors.New("room runs on Linux only")
}
