package service

import (
	"testing"
	"time"
)

// TestRedisKeepAlive: every form of --redis gets the once-a-minute
// keep-alive and the 10 s reply timeout; a URL's write_timeout wins.
func TestRedisKeepAlive(t *testing.T) {
	t.Parallel()
	for in, write := range map[string]time.Duration{
		"":                       redisWriteTimeout,
		"127.0.0.1:6379":         redisWriteTimeout,
		"redis://127.0.0.1:6379": redisWriteTimeout,
		"redis://127.0.0.1:6379?write_timeout=3s": 3 * time.Second,
	} {
		_, opt, err := redisOptions(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if opt.Dialer.KeepAlive != redisKeepAlive || opt.ConnWriteTimeout != write {
			t.Errorf("%q: keep-alive %s, write timeout %s", in, opt.Dialer.KeepAlive, opt.ConnWriteTimeout)
		}
	}
}
