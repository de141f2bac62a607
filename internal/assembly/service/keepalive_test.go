package service

import (
	"strings"
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

// TestRedisPipelining: every form of --redis gets the service's flush
// delay and connection count; a URL's max_flush_delay and
// pipeline_multiplex win, and bad values are refused by name.
func TestRedisPipelining(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]struct {
		delay time.Duration
		mux   int
	}{
		"":                       {redisFlushDelay, redisMultiplex},
		"127.0.0.1:6379":         {redisFlushDelay, redisMultiplex},
		"redis://127.0.0.1:6379": {redisFlushDelay, redisMultiplex},
		"redis://127.0.0.1:6379?max_flush_delay=0":                          {0, redisMultiplex},
		"redis://127.0.0.1:6379?max_flush_delay=50us":                       {50 * time.Microsecond, redisMultiplex},
		"redis://127.0.0.1:6379/0?pipeline_multiplex=2":                     {redisFlushDelay, 2},
		"rediss://127.0.0.1:6379?pipeline_multiplex=-1&max_flush_delay=1ms": {time.Millisecond, -1},
	} {
		_, opt, err := redisOptions(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if opt.MaxFlushDelay != want.delay || opt.PipelineMultiplex != want.mux {
			t.Errorf("%q: flush delay %s, multiplex %d; want %s, %d", in, opt.MaxFlushDelay, opt.PipelineMultiplex, want.delay, want.mux)
		}
	}
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379?max_flush_delay=soon":      "max_flush_delay",
		"redis://127.0.0.1:6379?max_flush_delay=-1us":      "max_flush_delay",
		"redis://127.0.0.1:6379?max_flush_delay=2ms":       "max_flush_delay",
		"redis://127.0.0.1:6379?pipeline_multiplex=9":      "pipeline_multiplex",
		"redis://127.0.0.1:6379?pipeline_multiplex=-2":     "pipeline_multiplex",
		"redis://127.0.0.1:6379?pipeline_multiplex=twenty": "pipeline_multiplex",
	} {
		if _, _, err := redisOptions(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", in, err, want)
		}
	}
}
