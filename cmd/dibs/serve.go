package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/dibsio/dibs/internal/service"
)

// serveFlags are the flags of dibs serve; each also reads an environment variable.
type serveFlags struct {
	addr, redis, db, adminToken, config, dataDir, logFormat, instance string

	// given names the settings given by a flag or an environment variable;
	// the config file fills in only the others.
	given map[string]bool
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func parseServeFlags(args []string, stderr io.Writer) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("dibs serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.addr, "addr", envOr("DIBS_ADDR", service.DefaultAddr), "HTTP listen address; port 0 picks a free port [DIBS_ADDR]")
	fs.StringVar(&f.redis, "redis", envOr("DIBS_REDIS_URL", ""), "redis://host:port/db, rediss://..., or host:port,host:port for Cluster; empty starts a private redis-server [DIBS_REDIS_URL]")
	fs.StringVar(&f.db, "db", envOr("DIBS_DATABASE_URL", service.DefaultDB), "sqlite://PATH or postgres://... [DIBS_DATABASE_URL]")
	fs.StringVar(&f.adminToken, "admin-token", envOr("DIBS_ADMIN_TOKEN", ""), "bearer token of the admin endpoints; empty generates one and logs it [DIBS_ADMIN_TOKEN]")
	fs.StringVar(&f.config, "config", envOr("DIBS_CONFIG", ""), "YAML file with the tunables [DIBS_CONFIG]")
	fs.StringVar(&f.dataDir, "data-dir", envOr("DIBS_DATA_DIR", service.DefaultDataDir), "data directory of the private redis-server [DIBS_DATA_DIR]")
	fs.StringVar(&f.instance, "instance", envOr("DIBS_INSTANCE", service.DefaultInstance()), "name of this instance's stream consumers; a restarted instance with the same name resumes its own pending entries [DIBS_INSTANCE]")
	fs.StringVar(&f.logFormat, "log-format", envOr("DIBS_LOG_FORMAT", "text"), "log format: text or json [DIBS_LOG_FORMAT]")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, err
		}
		return f, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "dibs serve: unexpected arguments: %v\n", fs.Args())
		return f, errUsage
	}
	f.given = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
	for name, env := range map[string]string{"addr": "DIBS_ADDR", "redis": "DIBS_REDIS_URL", "db": "DIBS_DATABASE_URL", "data-dir": "DIBS_DATA_DIR"} {
		if _, ok := os.LookupEnv(env); ok {
			f.given[name] = true
		}
	}
	return f, nil
}

// apply puts the flags into c, the config file's settings: a setting the
// file gives is kept unless a flag or an environment variable gave it.
func (f serveFlags) apply(c *service.Config) {
	for name, pair := range map[string]struct {
		dst *string
		src string
	}{
		"addr": {&c.Addr, f.addr}, "redis": {&c.Redis, f.redis}, "db": {&c.DB, f.db}, "data-dir": {&c.DataDir, f.dataDir},
	} {
		if f.given[name] || *pair.dst == "" {
			*pair.dst = pair.src
		}
	}
	c.AdminToken = f.adminToken
	c.Instance = f.instance
}

func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(f.logFormat, stderr)
	if err != nil {
		return err
	}
	cfg, err := service.LoadFile(f.config)
	if err != nil {
		return err
	}
	f.apply(&cfg)
	cfg.Failpoint = os.Getenv("DIBS_FAILPOINT")
	cfg.Logger = log
	return service.Run(ctx, cfg)
}
