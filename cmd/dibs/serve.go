package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/dibsio/dibs/internal/assembly/service"
)

// serveFlags are the flags of dibs serve; each also reads an environment variable.
type serveFlags struct {
	addr, redis, db, adminToken, config, dataDir, logFormat, instance string

	// given names the settings given by a flag or an environment variable;
	// the config file fills in only the others.
	given map[string]bool
}

// serveEnv names the environment variable of each flag of dibs serve; a
// flag given on the command line wins over its variable.
var serveEnv = map[string]string{
	"addr": "DIBS_ADDR", "redis": "DIBS_REDIS_URL", "db": "DIBS_DATABASE_URL", "admin-token": service.EnvAdminToken,
	"config": "DIBS_CONFIG", "data-dir": "DIBS_DATA_DIR", "instance": "DIBS_INSTANCE", "log-format": "DIBS_LOG_FORMAT",
}

func parseServeFlags(args []string, stderr io.Writer) (serveFlags, error) {
	var f serveFlags
	fs := newFlagSet("serve", "[flags]", stderr,
		"Without --redis it starts a private redis-server (from PATH) in --data-dir and uses a",
		"SQLite file: a single box, a demo. In production give every instance --redis, --db",
		"and a distinct --instance (docs/operations.md). It listens on 127.0.0.1 unless --addr",
		"says otherwise. Give the admin token as DIBS_ADMIN_TOKEN: a flag shows in ps.",
		"Every flag also reads the environment variable in brackets; the flag wins.")
	fs.StringVar(&f.addr, "addr", service.DefaultAddr, "HTTP listen address; port 0 picks a free port; 0.0.0.0:8080 listens on every interface [DIBS_ADDR]")
	fs.StringVar(&f.redis, "redis", "", "redis://host:port/db, rediss://..., or host:port,host:port for Cluster; empty starts a private redis-server [DIBS_REDIS_URL]")
	fs.StringVar(&f.db, "db", service.DefaultDB, "sqlite://PATH or postgres://... [DIBS_DATABASE_URL]")
	fs.StringVar(&f.adminToken, "admin-token", "", "bearer token of the admin endpoints; better DIBS_ADMIN_TOKEN, which ps does not show; left out, one is generated and logged; empty or change-me is refused [DIBS_ADMIN_TOKEN]")
	fs.StringVar(&f.config, "config", "", "YAML file with the tunables (docs/tuning.md) [DIBS_CONFIG]")
	fs.StringVar(&f.dataDir, "data-dir", service.DefaultDataDir, "data directory of the private redis-server [DIBS_DATA_DIR]")
	fs.StringVar(&f.instance, "instance", "", "name of this instance's stream consumers; a restarted instance with the same name resumes its own pending entries (default: the host name) [DIBS_INSTANCE]")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json [DIBS_LOG_FORMAT]")
	if err := parseFlags(fs, args); err != nil {
		return f, err
	}
	if err := applyEnv(fs, serveEnv); err != nil {
		return f, err
	}
	if f.instance == "" {
		f.instance = service.DefaultInstance()
	}
	f.given = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
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

// checkAdminToken refuses an admin token given on the command line that
// cannot be meant: empty (leave the flag out to have one generated) or the
// placeholder change-me. The environment's is checked by CheckEnv.
func (f serveFlags) checkAdminToken() error {
	switch {
	case f.given["admin-token"] && strings.TrimSpace(f.adminToken) == "":
		return errors.New("--admin-token is empty: give a token, or leave the flag out to have one generated")
	case service.IsPlaceholder(f.adminToken):
		return fmt.Errorf("--admin-token is the placeholder %q: choose a token of your own, better in %s", service.PlaceholderSecret, service.EnvAdminToken)
	}
	return nil
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
	// An empty or placeholder secret in the environment is refused first,
	// naming its variable, before a flag takes its value.
	if err := service.CheckEnv(os.Environ(), service.ServeSecretEnv...); err != nil {
		return err
	}
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	if err := f.checkAdminToken(); err != nil {
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
	cfg.ConfigFile = f.config
	cfg.Logger = log
	// The service hands log to every part; as the process's default too,
	// a line from anywhere else (the standard library's log package, say)
	// comes out in the same format.
	slog.SetDefault(log)
	return service.Run(ctx, cfg)
}
