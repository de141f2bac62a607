package main

import (
	"errors"
	"fmt"
	"io"
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

type httpConfig struct {
	MaxInFlight    int `yaml:"max_in_flight"`
	ClaimTimeoutMS int `yaml:"claim_timeout_ms"`
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
	return fc, nil
}

func (h httpConfig) apply(c *httpapi.Config) {
	c.MaxInFlight = h.MaxInFlight
	c.ClaimTimeout = time.Duration(h.ClaimTimeoutMS) * time.Millisecond
}
