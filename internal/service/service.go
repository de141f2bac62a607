// Package service assembles dibs serve: the database, Redis (an embedded
// redis-server unless one is given), the promotion manager with its
// confirmation pools, the HTTP API and the metrics, started and stopped in
// order.
//
//	svc, err := service.New(cfg) // checks what needs neither Redis nor the database
//	err = svc.Start(ctx)         // opens, starts and listens; logs "listening addr=..."
//	err = svc.Wait(ctx)          // until ctx ends or the service fails on its own
//	err = svc.Stop(ctx)          // drains requests, then consumers, then closes
//
// Run does all four.
package service

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/events"
	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/httpapi/edge"
	"github.com/dibsio/dibs/internal/buildinfo"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/stream"
	"github.com/dibsio/dibs/waitroom"
)

// KeyPrefix is the Redis key prefix of everything the service keeps.
const KeyPrefix = claim.DefaultPrefix

// Timeouts of the service's steps; Stop's ctx can only shorten them.
const (
	// RedisCheckTimeout bounds each of the PING and the version check of
	// Redis at start.
	RedisCheckTimeout = 5 * time.Second
	// DrainTimeout bounds the drain of the HTTP requests in flight.
	DrainTimeout = 15 * time.Second
	// ConsumersStopTimeout bounds the stop of the manager and its pools:
	// in-flight batches finish, the rest stays pending in Redis.
	ConsumersStopTimeout = 30 * time.Second
	// SchedulerStopTimeout bounds the stop of the waiting-room scheduler:
	// its round in flight is cancelled and its leases given up.
	SchedulerStopTimeout = 5 * time.Second
	// RedisStopTimeout bounds the stop of the embedded redis-server.
	RedisStopTimeout = 10 * time.Second
)

// Service is a running dibs serve. Create it with New, then Start it.
type Service struct {
	cfg        Config
	log        *slog.Logger
	crash      func(issued int)
	redisAddrs []string
	redisOpt   rueidis.ClientOption

	// Written by Start before it returns, read by Wait and Stop after it.
	mu          sync.Mutex // serialises Start and Stop
	started     bool
	stopped     bool
	ln          net.Listener
	hs          *http.Server
	mgr         *promotion.Manager
	sched       *waitroom.Scheduler     // stopped before the manager
	watcher     *waitroom.Watcher       // stopped when the HTTP server shuts down, and after the scheduler
	served      chan struct{}           // closed once hs.Serve returned
	serveErr    error                   // hs.Serve's result; written before served is closed
	redisExited <-chan struct{}         // closed if the embedded redis-server dies; nil otherwise
	closers     []func(context.Context) // what Start opened below the manager, closed in reverse by Stop
}

// New checks cfg as far as it can without Redis or the database.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	addrs, opt, _ := redisOptions(cfg.Redis) // checked by validate
	crash, _ := failpoint(cfg.Failpoint)
	return &Service{cfg: cfg, log: cfg.Logger, crash: crash, redisAddrs: addrs, redisOpt: opt}, nil
}

// Run runs the service until ctx is done, then drains gracefully. It
// returns why the service could not start or failed on its own; nil after
// a stop asked for by ctx.
func Run(ctx context.Context, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	err = s.Wait(ctx)
	_ = s.Stop(context.WithoutCancel(ctx)) // its problems are logged
	return err
}

// Start opens the database, starts or reaches Redis, starts the manager and
// serves the API. Everything that can be checked without Redis is checked,
// and the listen address bound, before the embedded redis-server starts.
// On failure Start closes what it opened. It starts a service once.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopped:
		return errors.New("service: start after stop")
	case s.started:
		return errors.New("service: already started")
	}
	if err := s.start(ctx); err != nil {
		s.closeAll(context.WithoutCancel(ctx))
		return err
	}
	s.started = true
	return nil
}

func (s *Service) start(ctx context.Context) error {
	cfg, log := s.cfg, s.log
	tuneGC(os.Getenv, log)
	if cfg.Redis == "" {
		if err := checkDataDir(cfg.DataDir); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	s.ln = ln
	s.closers = append(s.closers, func(context.Context) { _ = ln.Close() })
	unlock, err := lockDatabase(cfg.DB)
	if err != nil {
		return err
	}
	s.closers = append(s.closers, func(context.Context) { unlock() })
	st, err := openStore(ctx, cfg.DB)
	if err != nil {
		return err
	}
	s.closers = append(s.closers, func(context.Context) { _ = st.Close() })

	if cfg.Redis == "" {
		srv, err := startEmbeddedRedis(ctx, cfg.DataDir, cfg.EmbeddedRedis.AppendFsync, log)
		if err != nil {
			return err
		}
		s.closers = append(s.closers, func(ctx context.Context) {
			sctx, cancel := context.WithTimeout(ctx, RedisStopTimeout)
			defer cancel()
			if err := srv.Stop(sctx); err != nil {
				log.Warn("stopping redis-server", "err", err)
			}
		})
		s.redisExited = srv.Exited()
		s.redisAddrs = []string{srv.Addr()}
		s.redisOpt.InitAddress = s.redisAddrs
	}
	where := strings.Join(s.redisAddrs, ",")
	client, err := rueidis.NewClient(s.redisOpt)
	if err != nil {
		return fmt.Errorf("redis at %s unreachable: %w", where, err)
	}
	s.closers = append(s.closers, func(context.Context) { client.Close() })
	pctx, cancel := context.WithTimeout(ctx, RedisCheckTimeout)
	err = client.Do(pctx, client.B().Ping().Build()).Error()
	cancel()
	if err != nil {
		return fmt.Errorf("redis at %s unreachable: %w", where, err)
	}
	vctx, cancel := context.WithTimeout(ctx, RedisCheckTimeout)
	err = stream.CheckServer(vctx, client)
	cancel()
	if err != nil {
		return fmt.Errorf("redis at %s: %w", where, err)
	}
	s.logStart(ctx, st, client)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildinfo.Collector(buildinfo.Get()))
	apiMetrics := httpapi.NewMetrics(reg)
	pm := promotion.NewMetrics(reg, KeyPrefix)
	pm.CountDeadLetters(st)
	scfg := cfg.Stream
	scfg.Hooks = pm.StreamHooks()
	// The scheduler's ticks hand their admissions to the watcher, made
	// once the rooms it reads exist; it is set before the scheduler starts.
	// The scheduler and the rooms' collector tick and report the rooms the
	// manager knows from the database; it is set before either runs.
	var (
		watcher *waitroom.Watcher
		mgr     *promotion.Manager
	)
	known := func() []waitroom.Known {
		if mgr == nil {
			return nil
		}
		return mgr.KnownRooms()
	}
	rooms, err := newRooms(client, cfg, log, known, func(id string, a []waitroom.Admission) { watcher.Admit(id, a) })
	if err != nil {
		return err
	}
	reg.MustRegister(waitroom.NewCollector(rooms, 0, 0))
	watcher = waitroom.NewWatcher(rooms, waitroom.WatcherConfig{Logger: log})
	kinds, err := issue.Builtin(cfg.Issue)
	if err != nil {
		return err
	}
	mgr, err = promotion.New(client, st, promotion.Config{
		Issuers:  kinds,
		Rooms:    rooms,
		Prefix:   KeyPrefix,
		Instance: cfg.Instance,
		Stream:   scfg,
		Logger:   log,
		OnIssued: func(id string, n int) {
			pm.Issued(id, n)
			s.crash(n)
		},
		OnDeadLetter:     pm.DeadLetter,
		OnBacklog:        pm.Backlog,
		OnHalted:         pm.Halted,
		OnDrained:        pm.Drained,
		OnRequeued:       pm.Requeued,
		OnJournalDropped: pm.JournalDropped,
		Retention:        cfg.Promotions.Retention,
		SoldOutMemory:    cfg.Promotions.soldOutMemory(),
		ClassicClaims:    cfg.Promotions.ClassicClaims,
		UnbatchedClaims:  cfg.Promotions.unbatchedClaims(),
		OnMemoryAnswer:   pm.MemoryAnswer,
		OnRemaining:      pm.Remaining,
		OnHandling:       pm.Handling,
	})
	if err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	s.mgr = mgr
	if err := watcher.Start(ctx); err != nil {
		return err
	}
	s.watcher = watcher
	if err := s.startEvents(st, events.NewMetrics(reg)); err != nil {
		return err
	}
	sched := waitroom.NewScheduler(rooms)
	if err := sched.Start(ctx); err != nil {
		return err
	}
	s.sched = sched

	token := cfg.AdminToken
	if token == "" && len(cfg.Admin.Tokens) == 0 {
		token = randomToken()
		log.Info("generated admin token; set "+EnvAdminToken+" to choose one", "admin_token", token)
	}
	ecfg := cfg.Edge
	ecfg.Metrics = edge.NewMetrics(reg)
	hcfg := httpapi.Config{Manager: mgr, AdminToken: token, Redis: client, KeyPrefix: KeyPrefix,
		Metrics: apiMetrics, Gatherer: reg, Logger: log, Edge: ecfg, Watcher: watcher}
	cfg.HTTP.apply(&hcfg)
	if err := cfg.Admin.apply(&hcfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	api, err := httpapi.New(hcfg)
	if err != nil {
		return err
	}
	// Read and write deadlines are set per request by the API (a streamed
	// request pushes them ahead as it goes), so the server sets none.
	s.hs = &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Event streams of waiting-room standings last until their user is let
	// in: stopping the watcher ends them, so the drain does not wait for
	// them (their clients reconnect elsewhere).
	s.hs.RegisterOnShutdown(func() { s.stopWatcher(context.Background()) })
	s.served = make(chan struct{})
	go func() {
		s.serveErr = s.hs.Serve(httpapi.LimitListener(ln, cfg.HTTP.MaxConns))
		close(s.served)
	}()
	log.Info("listening", "addr", ln.Addr().String())
	return nil
}

// Addr is the address the API listens on; nil before Start.
func (s *Service) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Wait blocks until ctx is done or the started service fails on its own:
// the HTTP server stops serving, or the embedded redis-server exits. It
// returns nil when ctx ended, else the failure. Before Start it waits for
// ctx alone.
func (s *Service) Wait(ctx context.Context) error {
	s.mu.Lock()
	served, redisExited := s.served, s.redisExited
	s.mu.Unlock()
	select {
	case <-served:
		return fmt.Errorf("http server: %w", s.serveErr)
	case <-ctx.Done():
		return nil
	case <-redisExited:
		// Nothing can work without it; exit so a supervisor restarts dibs,
		// which restarts redis-server on the same AOF.
		s.log.Error("embedded redis-server exited; shutting down")
		return errors.New("the embedded redis-server exited unexpectedly; restart dibs")
	}
}

// Stop drains the requests in flight, then stops the manager and its pools
// (unfinished entries stay pending in Redis for the next start), then
// closes Redis and the database. Each step is bounded by its own timeout
// and by ctx; what goes wrong is logged. It returns ctx.Err() if ctx ended
// first. Safe to call twice or before Start.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	if !s.started {
		s.closeAll(ctx)
		return ctx.Err()
	}
	rep := stopReport{start: time.Now(), pools: s.mgr.Registry().Len()}
	s.log.Info("shutting down: draining requests and consumers", "pools", rep.pools)
	hctx, cancel := context.WithTimeout(ctx, DrainTimeout)
	err := s.hs.Shutdown(hctx)
	if err != nil {
		s.log.Warn("http drain", "err", err)
	}
	rep.requests = err == nil
	cancel()
	<-s.served
	rep.scheduler, rep.consumers = s.closeAll(ctx)
	rep.log(s.log)
	return ctx.Err()
}

// closeAll stops the waiting-room scheduler and the manager, then closes
// what Start opened, in reverse. It reports whether the scheduler and the
// manager (with its pools) stopped in time, or were not running.
func (s *Service) closeAll(ctx context.Context) (schedOK, mgrOK bool) {
	schedOK, mgrOK = true, true
	if s.sched != nil {
		sctx, cancel := context.WithTimeout(ctx, SchedulerStopTimeout)
		if err := s.sched.Stop(sctx); err != nil {
			s.log.Warn("stopping the waiting-room scheduler", "err", err)
			schedOK = false
		}
		cancel()
		s.sched = nil
	}
	s.stopWatcher(ctx)
	if s.mgr != nil {
		mctx, cancel := context.WithTimeout(ctx, ConsumersStopTimeout)
		if err := s.mgr.Stop(mctx); err != nil {
			s.log.Warn("stopping consumers", "err", err)
			mgrOK = false
		}
		cancel()
		s.mgr = nil
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i](ctx)
	}
	s.closers = nil
	return schedOK, mgrOK
}

// stopWatcher stops the waiting-room watcher, within SchedulerStopTimeout.
// It is safe to call twice, and concurrently.
func (s *Service) stopWatcher(ctx context.Context) {
	if s.watcher == nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, SchedulerStopTimeout)
	defer cancel()
	if err := s.watcher.Stop(wctx); err != nil {
		s.log.Warn("stopping the waiting-room watcher", "err", err)
	}
}

// newRooms returns the waiting rooms of the service, handing the users let
// in to onAdmit, signing entry tokens with the configured keys or, without
// any, a random key made now (whose passes verify on this instance only,
// which is logged).
func newRooms(client rueidis.Client, cfg Config, log *slog.Logger, known func() []waitroom.Known, onAdmit func(string, []waitroom.Admission)) (*waitroom.Rooms, error) {
	var keys []waitroom.Key
	if cfg.WaitingRoom.Secret != "" {
		var err error
		if keys, err = waitroom.ParseKeys(cfg.WaitingRoom.Secret); err != nil {
			return nil, fmt.Errorf("config: waiting_room.secret: %w", err)
		}
	} else {
		secret := make([]byte, waitroom.MinSecretLen)
		_, _ = rand.Read(secret)
		keys = []waitroom.Key{{ID: "local", Secret: secret}}
		log.Warn("no waiting-room secret configured (" + EnvWaitroomSecret + "): entry tokens are signed with a random key and verify on this instance only")
	}
	rooms, err := waitroom.New(client, waitroom.Config{
		Prefix:       KeyPrefix,
		Keys:         keys,
		Instance:     cfg.Instance,
		TickInterval: time.Duration(cfg.WaitingRoom.TickMS) * time.Millisecond,
		Workers:      cfg.WaitingRoom.Workers,
		Known:        known,
		OnAdmit:      onAdmit,
		Logger:       log,
	})
	if err != nil {
		return nil, fmt.Errorf("config: waiting_room: %w", err)
	}
	return rooms, nil
}

func startEmbeddedRedis(ctx context.Context, dataDir, fsync string, log *slog.Logger) (*redisserver.Server, error) {
	dir, err := filepath.Abs(filepath.Join(dataDir, "redis"))
	if err != nil {
		return nil, err
	}
	srv, err := redisserver.Start(ctx, redisserver.Options{Dir: dir, AppendFsync: fsync, Lock: true, Log: &childLog{log: log}})
	if err != nil {
		return nil, fmt.Errorf("embedded redis-server: %w", err)
	}
	log.Info("started private redis-server", "addr", srv.Addr(), "dir", dir, "appendfsync", fsync)
	return srv, nil
}
