package service

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/buildinfo"
	"github.com/dibsio/dibs/store"
)

// maxChildLine bounds one line of the embedded redis-server's output in the
// log; the rest of a longer line is dropped.
const maxChildLine = 4 << 10

// childLog is the io.Writer of a child process's output: each line it
// writes becomes one Info line of log, msg "redis-server", the line itself
// as line. A line is held until its end arrives, at most maxChildLine
// bytes of it. Safe for concurrent use (stdout and stderr share it).
type childLog struct {
	log *slog.Logger

	mu      sync.Mutex
	partial []byte // the start of a line whose end has not come yet
	cut     bool   // the line in partial is longer than maxChildLine
}

func (c *childLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxChildLine - len(c.partial); len(chunk) > room {
			chunk, c.cut = chunk[:room], true
		}
		c.partial = append(c.partial, chunk...)
		if i < 0 {
			break
		}
		c.flush()
		p = p[i+1:]
	}
	return n, nil
}

// flush logs the line held. The caller holds c.mu.
func (c *childLog) flush() {
	line := strings.TrimRight(string(c.partial), "\r")
	if line != "" {
		attrs := []any{"line", line}
		if c.cut {
			attrs = append(attrs, "truncated", true)
		}
		c.log.Info("redis-server", attrs...)
	}
	c.partial, c.cut = c.partial[:0], false
}

// databaseKind is the backend of a database URL: sqlite or postgres.
func databaseKind(dbURL string) string {
	scheme, _, ok := strings.Cut(dbURL, "://")
	if !ok {
		return "unknown"
	}
	if scheme == "postgresql" {
		return "postgres"
	}
	return scheme
}

// logStart writes the start line: what runs (version, commit), on which
// database (kind, schema version) and Redis (addresses, single node or
// Cluster, embedded or not), as which instance, from which config file.
func (s *Service) logStart(ctx context.Context, st store.Store, client rueidis.Client) {
	bi := buildinfo.Get()
	schema := -1
	if sv, ok := st.(store.SchemaVersioner); ok {
		if v, err := sv.SchemaVersion(ctx); err == nil {
			schema = v
		}
	}
	mode := "single"
	if client.Mode() == rueidis.ClientModeCluster {
		mode = "cluster"
	}
	cfgFile := s.cfg.ConfigFile
	if cfgFile == "" {
		cfgFile = "none"
	}
	s.log.Info("starting", "version", bi.Version, "commit", bi.Revision,
		"database", databaseKind(s.cfg.DB), "schema_version", schema,
		"redis", strings.Join(s.redisAddrs, ","), "redis_mode", mode, "redis_embedded", s.cfg.Redis == "",
		"instance", s.cfg.Instance, "config", cfgFile)
}

// stopReport is what a stop drained, for the "stopped" line.
type stopReport struct {
	start     time.Time
	requests  bool // the requests in flight finished within DrainTimeout
	pools     int  // confirmation pools running when the stop began
	consumers bool // the manager and its pools stopped within ConsumersStopTimeout
	scheduler bool // the waiting-room scheduler stopped in time
}

// log writes the "stopped" line.
func (r stopReport) log(log *slog.Logger) {
	log.Info("stopped", "requests_drained", r.requests, "pools_stopped", r.pools,
		"consumers_drained", r.consumers, "scheduler_stopped", r.scheduler, "took_ms", time.Since(r.start).Milliseconds())
}
