package redisserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// readyPollInterval is how often waitReady asks the child for PONG.
const readyPollInterval = 20 * time.Millisecond

// waitReady waits until addr answers PING with PONG (not -LOADING), the
// child exits, or ctx ends.
func waitReady(ctx context.Context, addr string, exited <-chan struct{}) error {
	t := time.NewTicker(readyPollInterval)
	defer t.Stop()
	var last error
	for {
		if last = ping(ctx, addr); last == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("redis-server exited during start")
		case <-ctx.Done():
			return fmt.Errorf("%w (last PING: %v)", ctx.Err(), last)
		case <-t.C:
		}
	}
}

// ping sends one RESP PING over a fresh connection.
func ping(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	line = strings.TrimRight(line, "\r\n")
	if line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}
