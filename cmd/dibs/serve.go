package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// serveFlags are the flags of dibs serve; each also reads an environment variable.
type serveFlags struct {
	addr, redis, db, adminToken, config, dataDir, logFormat, instance string

	// given names the settings given by a flag or an environment variable;
	// the config file fills in only the others.
	given map[string]bool
}

func defaultInstance() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "dibs"
	}
	return h
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
	fs.StringVar(&f.addr, "addr", envOr("DIBS_ADDR", "127.0.0.1:8080"), "HTTP listen address; port 0 picks a free port [DIBS_ADDR]")
	fs.StringVar(&f.redis, "redis", envOr("DIBS_REDIS_URL", ""), "redis://host:port/db, rediss://..., or host:port,host:port for Cluster; empty starts a private redis-server [DIBS_REDIS_URL]")
	fs.StringVar(&f.db, "db", envOr("DIBS_DATABASE_URL", "sqlite://dibs.db"), "sqlite://PATH or postgres://... [DIBS_DATABASE_URL]")
	fs.StringVar(&f.adminToken, "admin-token", envOr("DIBS_ADMIN_TOKEN", ""), "bearer token of the admin endpoints; empty generates one and logs it [DIBS_ADMIN_TOKEN]")
	fs.StringVar(&f.config, "config", envOr("DIBS_CONFIG", ""), "YAML file with the tunables [DIBS_CONFIG]")
	fs.StringVar(&f.dataDir, "data-dir", envOr("DIBS_DATA_DIR", "dibs-data"), "data directory of the private redis-server [DIBS_DATA_DIR]")
	fs.StringVar(&f.instance, "instance", envOr("DIBS_INSTANCE", defaultInstance()), "name of this instance's stream consumers; a restarted instance with the same name resumes its own pending entries [DIBS_INSTANCE]")
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

// applyFile fills the settings not given by flag or environment from the
// config file.
func (f *serveFlags) applyFile(fc fileConfig) {
	for name, pair := range map[string]struct {
		dst *string
		src string
	}{
		"addr": {&f.addr, fc.Addr}, "redis": {&f.redis, fc.Redis}, "db": {&f.db, fc.DB}, "data-dir": {&f.dataDir, fc.DataDir},
	} {
		if !f.given[name] && pair.src != "" {
			*pair.dst = pair.src
		}
	}
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
	fc, err := loadConfig(f.config)
	if err != nil {
		return err
	}
	f.applyFile(fc)
	fc.Stream.Logger = log
	return serve(ctx, f, fc, log)
}

// serve runs the service until ctx is done, then drains gracefully.
// Everything that can be checked without Redis is checked, and the listen
// address bound, before the embedded redis-server starts.
func serve(ctx context.Context, f serveFlags, fc fileConfig, log *slog.Logger) (err error) {
	var (
		cleanups    []func()
		redisExited <-chan struct{} // closed if the embedded redis-server dies; nil otherwise
	)
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}()

	redisAddrs, redisOpt, err := redisOptions(f.redis)
	if err != nil {
		return err
	}
	if err := checkStreamConfig(fc.Stream); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	crash, err := failpoint(os.Getenv("DIBS_FAILPOINT"))
	if err != nil {
		return err
	}
	if f.redis == "" {
		if err := checkDataDir(f.dataDir); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.addr, err)
	}
	cleanups = append(cleanups, func() { _ = ln.Close() })
	unlock, err := lockDatabase(f.db)
	if err != nil {
		return err
	}
	cleanups = append(cleanups, unlock)
	st, err := store.Open(ctx, f.db)
	if err != nil {
		return fmt.Errorf("database %s: %w", redactURL(f.db), err)
	}
	cleanups = append(cleanups, func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("database %s: migrate: %w", redactURL(f.db), err)
	}

	if f.redis == "" {
		srv, err := startEmbeddedRedis(ctx, f.dataDir, fc.EmbeddedRedis.AppendFsync, log)
		if err != nil {
			return err
		}
		cleanups = append(cleanups, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Stop(sctx); err != nil {
				log.Warn("stopping redis-server", "err", err)
			}
		})
		redisExited = srv.Exited()
		redisAddrs = []string{srv.Addr()}
		redisOpt.InitAddress = redisAddrs
	}
	client, err := rueidis.NewClient(redisOpt)
	if err != nil {
		return fmt.Errorf("redis at %s unreachable: %w", strings.Join(redisAddrs, ","), err)
	}
	cleanups = append(cleanups, client.Close)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = client.Do(pctx, client.B().Ping().Build()).Error()
	cancel()
	if err != nil {
		return fmt.Errorf("redis at %s unreachable: %w", strings.Join(redisAddrs, ","), err)
	}
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = stream.CheckServer(vctx, client)
	cancel()
	if err != nil {
		return fmt.Errorf("redis at %s: %w", strings.Join(redisAddrs, ","), err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := httpapi.NewMetrics(reg)
	sm := newStreamMetrics(reg)
	scfg := fc.Stream
	scfg.Hooks = sm.hooks()

	mgr, err := promotion.New(client, st, promotion.Config{
		Prefix:   keyPrefix,
		Instance: f.instance,
		Stream:   scfg,
		Logger:   log,
		OnIssued: func(_ string, n int) {
			metrics.Issued.Add(float64(n))
			crash(n)
		},
		OnDeadLetter: func(string) { metrics.DeadLetters.Inc() },
		OnBacklog: func(id string, n int64) {
			metrics.Pending.WithLabelValues(id).Set(float64(n))
		},
		OnHalted: func(id string, halted bool) {
			v := 0.0
			if halted {
				v = 1
			}
			metrics.Halted.WithLabelValues(id).Set(v)
		},
		OnDrained: forgetDrained(metrics, sm, keyPrefix),
	})
	if err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if serr := mgr.Stop(sctx); serr != nil {
			log.Warn("stopping consumers", "err", serr)
		}
	}()

	token := f.adminToken
	if token == "" {
		token = randomToken()
		log.Info("generated admin token; pass --admin-token to choose one", "admin_token", token)
	}
	hcfg := httpapi.Config{Manager: mgr, AdminToken: token, Redis: client, KeyPrefix: keyPrefix,
		Metrics: metrics, Gatherer: reg, Logger: log}
	fc.HTTP.apply(&hcfg)
	api, err := httpapi.New(hcfg)
	if err != nil {
		return err
	}

	// Read and write deadlines are set per request by the API (a streamed
	// request pushes them ahead as it goes), so the server sets none.
	hs := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(httpapi.LimitListener(ln, fc.HTTP.MaxConns)) }()
	log.Info("listening", "addr", ln.Addr().String())

	var failure error
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	case <-redisExited:
		// Nothing can work without it; exit so a supervisor restarts dibs,
		// which restarts redis-server on the same AOF.
		failure = errors.New("the embedded redis-server exited unexpectedly; restart dibs")
		log.Error("embedded redis-server exited; shutting down")
	}
	log.Info("shutting down: draining requests and consumers")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("http drain", "err", err)
	}
	<-errc
	return failure
}

// keyPrefix is the Redis key prefix of everything dibs serve keeps.
const keyPrefix = claim.DefaultPrefix

// redisOptions parses --redis: a redis:// or rediss:// URL, or a comma list
// of host:port seeds (Redis Cluster). Empty means the embedded server.
func redisOptions(s string) ([]string, rueidis.ClientOption, error) {
	opt := rueidis.ClientOption{DisableCache: true}
	switch {
	case s == "":
		return nil, opt, nil
	case strings.HasPrefix(s, "redis://"), strings.HasPrefix(s, "rediss://"), strings.HasPrefix(s, "unix://"):
		o, err := rueidis.ParseURL(s)
		if err != nil {
			return nil, opt, fmt.Errorf("--redis: %w", err)
		}
		o.DisableCache = true
		return o.InitAddress, o, nil
	case strings.Contains(s, "://"):
		return nil, opt, fmt.Errorf("--redis: unsupported scheme in %q (want redis://, rediss:// or host:port list)", s)
	}
	addrs := strings.Split(s, ",")
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(strings.TrimSpace(a)); err != nil {
			return nil, opt, fmt.Errorf("--redis: %q is not host:port", a)
		}
	}
	opt.InitAddress = addrs
	return addrs, opt, nil
}

func startEmbeddedRedis(ctx context.Context, dataDir, fsync string, log *slog.Logger) (*redisserver.Server, error) {
	if fsync == "" {
		fsync = "everysec"
	}
	dir, err := filepath.Abs(filepath.Join(dataDir, "redis"))
	if err != nil {
		return nil, err
	}
	srv, err := redisserver.Start(ctx, redisserver.Options{Dir: dir, AppendFsync: fsync, Lock: true})
	if err != nil {
		return nil, fmt.Errorf("embedded redis-server: %w", err)
	}
	log.Info("started private redis-server", "addr", srv.Addr(), "dir", dir, "appendfsync", fsync)
	return srv, nil
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// redactURL hides a password in a database URL.
func redactURL(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			cred := rest[:at]
			if c := strings.Index(cred, ":"); c >= 0 {
				return s[:i+3] + cred[:c] + ":***" + rest[at:]
			}
		}
	}
	return s
}

// failpoint returns the crash hook named by DIBS_FAILPOINT, for crash
// testing with real processes. "crash-after-commit:N" kills the process with
// SIGKILL once N claims were committed to the database, before they are
// acknowledged in Redis. Empty means no failpoint.
func failpoint(spec string) (func(issued int), error) {
	if spec == "" {
		return func(int) {}, nil
	}
	name, arg, _ := strings.Cut(spec, ":")
	n, err := strconv.Atoi(arg)
	if name != "crash-after-commit" || err != nil || n < 1 {
		return nil, fmt.Errorf("DIBS_FAILPOINT: unknown failpoint %q (want crash-after-commit:N)", spec)
	}
	var total atomic.Int64
	return func(issued int) {
		if total.Add(int64(issued)) >= int64(n) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way; never reach the acknowledgement
		}
	}, nil
}
