//go:build tools

// Package tools pins module dependencies that are not yet imported elsewhere.
package tools

import (
	_ "github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/rueidis"
	_ "go.uber.org/goleak"
	_ "golang.org/x/sync/errgroup"
	_ "gopkg.in/yaml.v3"
	_ "modernc.org/sqlite"
)
