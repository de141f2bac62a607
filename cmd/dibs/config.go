package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/stream"
)

// fileConfig is the YAML file given with --config. Every section is
// optional; absent values keep their defaults, and flags win over the file.
type fileConfig struct {
	Addr    string        `yaml:"addr"`
	Redis   string        `yaml:"redis"`
	DB      string        `yaml:"db"`
	DataDir string        `yaml:"data_dir"`
	Stream  stream.Config `yaml:"stream"`
	HTTP    httpConfig    `yaml:"http"`
	// WaitingRoom tunes the waiting-room scheduler (tick_ms, workers).
	WaitingRoom struct {
		TickMS  int `yaml:"tick_ms"`
		Workers int `yaml:"workers"`
	} `yaml:"waiting_room"`
	EmbeddedRedis struct {
		// AppendFsync is the embedded redis-server's appendfsync:
		// everysec (default) or always.
		AppendFsync string `yaml:"appendfsync"`
	} `yaml:"embedded_redis"`
}

// httpConfig is the `http:` section; zero means the default.
type httpConfig struct {
	MaxInFlight    int `yaml:"max_in_flight"`
	ClaimTimeoutMS int `yaml:"claim_timeout_ms"`
	// MaxConns caps the connections the instance holds open at once;
	// further clients wait in the kernel's accept queue.
	MaxConns int `yaml:"max_conns"`
	// ReadTimeoutMS and WriteTimeoutMS are the deadlines of a request that
	// is not streamed.
	ReadTimeoutMS  int `yaml:"read_timeout_ms"`
	WriteTimeoutMS int `yaml:"write_timeout_ms"`
	// StreamIdleTimeoutMS is how far each line or event of a streamed
	// request pushes its deadlines ahead.
	StreamIdleTimeoutMS int `yaml:"stream_idle_timeout_ms"`
	// MaxStreams bounds concurrent streamed requests.
	MaxStreams int `yaml:"max_streams"`
	// IdempotencyTTLSeconds is how long an admin request's answer is kept
	// for retries with its Idempotency-Key.
	IdempotencyTTLSeconds int `yaml:"idempotency_ttl_seconds"`
}

// validate names the first key that cannot work.
func (h httpConfig) validate() error {
	const none = 0 // not a duration
	for _, v := range []struct {
		key  string
		n    int
		unit time.Duration
	}{
		{"max_in_flight", h.MaxInFlight, none}, {"claim_timeout_ms", h.ClaimTimeoutMS, time.Millisecond},
		{"max_conns", h.MaxConns, none},
		{"read_timeout_ms", h.ReadTimeoutMS, time.Millisecond}, {"write_timeout_ms", h.WriteTimeoutMS, time.Millisecond},
		{"stream_idle_timeout_ms", h.StreamIdleTimeoutMS, time.Millisecond}, {"max_streams", h.MaxStreams, none},
		{"idempotency_ttl_seconds", h.IdempotencyTTLSeconds, time.Second},
	} {
		if v.n < 0 {
			return fmt.Errorf("http.%s must not be negative, got %d", v.key, v.n)
		}
		if v.unit != none && int64(v.n) > math.MaxInt64/int64(v.unit) {
			return fmt.Errorf("http.%s is too large, got %d", v.key, v.n)
		}
	}
	return nil
}

func defaultFileConfig() fileConfig {
	return fileConfig{Stream: stream.DefaultConfig()}
}

// loadConfig reads the YAML file at path over the defaults; unknown keys are errors.
func loadConfig(path string) (fileConfig, error) {
	fc := defaultFileConfig()
	if path == "" {
		return fc, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fc, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		return fc, fmt.Errorf("config %s: %w", path, err)
	}
	switch fc.EmbeddedRedis.AppendFsync {
	case "", "everysec", "always":
	default:
		return fc, fmt.Errorf("config %s: embedded_redis.appendfsync must be everysec or always", path)
	}
	if err := fc.HTTP.validate(); err != nil {
		return fc, fmt.Errorf("config %s: %w", path, err)
	}
	return fc, nil
}

func (h httpConfig) apply(c *httpapi.Config) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	c.MaxInFlight = h.MaxInFlight
	c.ClaimTimeout = ms(h.ClaimTimeoutMS)
	c.ReadTimeout = ms(h.ReadTimeoutMS)
	c.WriteTimeout = ms(h.WriteTimeoutMS)
	c.StreamIdleTimeout = ms(h.StreamIdleTimeoutMS)
	c.MaxStreams = h.MaxStreams
	c.IdempotencyTTL = time.Duration(h.IdempotencyTTLSeconds) * time.Second
}
