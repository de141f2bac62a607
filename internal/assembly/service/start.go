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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/events"
	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/httpapi/edge"
	"github.com/dibsio/dibs/httpapi/ui"
	"github.com/dibsio/dibs/internal/buildinfo"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
	"github.com/dibsio/dibs/waitroom"
)

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

// start runs Start's steps in order; each one it passes appends how to undo
// it to s.closers, which Start runs if a later step fails.
func (s *Service) start(ctx context.Context) error {
	tuneGC(os.Getenv, s.log)
	st, err := s.openLocal(ctx)
	if err != nil {
		return err
	}
	client, err := s.connectRedis(ctx)
	if err != nil {
		return err
	}
	s.logStart(ctx, st, client)
	m := newServiceMetrics(st)
	tally := new(ui.Tally)
	if err := s.startManager(ctx, client, st, m, tally); err != nil {
		return err
	}
	return s.serve(client, m, tally)
}

// openLocal does what needs neither Redis nor the network beyond this
// host, so a mistake there fails before any redis-server starts: it checks
// the data directory (for the embedded Redis), binds the listen address,
// locks a SQLite file and opens and migrates the database.
func (s *Service) openLocal(ctx context.Context) (store.Store, error) {
	cfg := s.cfg
	if cfg.Redis == "" {
		if err := checkDataDir(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	s.ln = ln
	s.closers = append(s.closers, func(context.Context) { _ = ln.Close() })
	unlock, err := lockDatabase(cfg.DB)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func(context.Context) { unlock() })
	st, err := openStore(ctx, cfg.DB)
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func(context.Context) { _ = st.Close() })
	return st, nil
}

// connectRedis starts the embedded redis-server unless --redis names one,
// connects, and checks that Redis answers (PING) and is recent enough.
func (s *Service) connectRedis(ctx context.Context) (rueidis.Client, error) {
	if s.cfg.Redis == "" {
		if err := s.startEmbedded(ctx); err != nil {
			return nil, err
		}
	}
	where := strings.Join(s.redisAddrs, ",")
	client, err := rueidis.NewClient(s.redisOpt)
	if err != nil {
		return nil, fmt.Errorf("redis at %s unreachable: %w", where, err)
	}
	s.closers = append(s.closers, func(context.Context) { client.Close() })
	pctx, cancel := context.WithTimeout(ctx, RedisCheckTimeout)
	err = client.Do(pctx, client.B().Ping().Build()).Error()
	cancel()
	if err != nil {
		return nil, fmt.Errorf("redis at %s unreachable: %w", where, err)
	}
	vctx, cancel := context.WithTimeout(ctx, RedisCheckTimeout)
	err = stream.CheckServer(vctx, client)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("redis at %s: %w", where, err)
	}
	return client, nil
}

// startEmbedded starts the private redis-server in the data directory and
// points the Redis options at it; Wait watches it for an unexpected exit.
func (s *Service) startEmbedded(ctx context.Context) error {
	log := s.log
	srv, err := startEmbeddedRedis(ctx, s.cfg.DataDir, s.cfg.EmbeddedRedis.AppendFsync, log)
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
	return nil
}

// serviceMetrics is the service's Prometheus registry and the metrics the
// API and the manager report to.
type serviceMetrics struct {
	reg   *prometheus.Registry
	api   *httpapi.Metrics
	promo *promotion.Metrics
}

// newServiceMetrics registers the process's, the build's, the API's and the
// confirmation path's metrics; the dead letters waiting are read from st.
func newServiceMetrics(st store.Store) serviceMetrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildinfo.Collector(buildinfo.Get()))
	m := serviceMetrics{reg: reg, api: httpapi.NewMetrics(reg), promo: promotion.NewMetrics(reg, KeyPrefix)}
	m.promo.CountDeadLetters(st)
	return m
}

// startManager makes the waiting rooms and their watcher, then starts the
// promotion manager, the watcher, the event deliveries and the
// waiting-room scheduler, in that order. tally counts the claims issued
// here and keeps the latest tick of each room ticked here, for the
// dashboard.
func (s *Service) startManager(ctx context.Context, client rueidis.Client, st store.Store, m serviceMetrics, tally *ui.Tally) error {
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
	rooms, err := newRooms(client, s.cfg, s.log, known, func(id string, a []waitroom.Admission) { watcher.Admit(id, a) },
		func(id string, res waitroom.TickResult) { tally.Room(id, roomTick(res)) })
	if err != nil {
		return err
	}
	m.reg.MustRegister(waitroom.NewCollector(rooms, 0, 0))
	watcher = waitroom.NewWatcher(rooms, waitroom.WatcherConfig{Logger: s.log})
	mcfg, err := s.managerConfig(rooms, m.promo, tally)
	if err != nil {
		return err
	}
	mgr, err = promotion.New(client, st, mcfg)
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
	if err := s.startEvents(st, events.NewMetrics(m.reg)); err != nil {
		return err
	}
	sched := waitroom.NewScheduler(rooms)
	if err := sched.Start(ctx); err != nil {
		return err
	}
	s.sched = sched
	return nil
}

// managerConfig is the promotion manager's configuration: the service's
// settings, with every hook plugged into the metrics pm and the
// dashboard's tally (and the crash failpoint, for tests).
func (s *Service) managerConfig(rooms *waitroom.Rooms, pm *promotion.Metrics, tally *ui.Tally) (promotion.Config, error) {
	cfg := s.cfg
	kinds, err := issue.Builtin(cfg.Issue)
	if err != nil {
		return promotion.Config{}, err
	}
	scfg := cfg.Stream
	scfg.Hooks = pm.StreamHooks()
	return promotion.Config{
		Issuers:  kinds,
		Rooms:    rooms,
		Prefix:   KeyPrefix,
		Instance: cfg.Instance,
		Stream:   scfg,
		Logger:   s.log,
		OnIssued: func(id string, n int) {
			pm.Issued(id, n)
			tally.Issued(id, n)
			s.crash(n)
		},
		OnDeadLetter:        pm.DeadLetter,
		OnBacklog:           pm.Backlog,
		OnHalted:            pm.Halted,
		OnDrained:           pm.Drained,
		OnRequeued:          pm.Requeued,
		OnJournalDropped:    pm.JournalDropped,
		OnJournal:           pm.Journal,
		JournalBytes:        int64(cfg.Promotions.JournalMiB) << 20,
		IdleRecheckInterval: time.Duration(cfg.Promotions.IdleRecheckSeconds) * time.Second,
		Retention:           cfg.Promotions.Retention,
		SoldOutMemory:       cfg.Promotions.soldOutMemory(),
		ClassicClaims:       cfg.Promotions.ClassicClaims,
		UnbatchedClaims:     cfg.Promotions.unbatchedClaims(),
		OnMemoryAnswer:      pm.MemoryAnswer,
		OnRemaining:         pm.Remaining,
		OnHandling:          pm.Handling,
	}, nil
}

// serve builds the HTTP API on the started manager and serves it on the
// bound listener, in a goroutine whose end Wait and Stop watch. Without an
// admin token configured it makes one and logs it.
func (s *Service) serve(client rueidis.Client, m serviceMetrics, tally *ui.Tally) error {
	cfg, log := s.cfg, s.log
	token := cfg.AdminToken
	if token == "" && len(cfg.Admin.Tokens) == 0 {
		token = randomToken()
		log.Info("generated admin token; set "+EnvAdminToken+" to choose one", "admin_token", token)
	}
	ecfg := cfg.Edge
	ecfg.Metrics = edge.NewMetrics(m.reg)
	hcfg := httpapi.Config{Manager: s.mgr, AdminToken: token, Redis: client, KeyPrefix: KeyPrefix,
		Metrics: m.api, Gatherer: m.reg, Logger: log, Edge: ecfg, Watcher: s.watcher, Tally: tally}
	cfg.HTTP.apply(&hcfg)
	if err := cfg.Admin.apply(&hcfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	api, err := httpapi.New(hcfg)
	if err != nil {
		return err
	}
	api.Start()
	s.api = api
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
	ln := s.ln
	go func() {
		s.serveErr = s.hs.Serve(httpapi.LimitListener(ln, cfg.HTTP.MaxConns))
		close(s.served)
	}()
	log.Info("listening", "addr", ln.Addr().String())
	return nil
}

// newRooms returns the waiting rooms of the service, handing the users let
// in to onAdmit and each tick to onTick, signing entry tokens with the configured keys or, without
// any, a random key made now (whose passes verify on this instance only,
// which is logged).
func newRooms(client rueidis.Client, cfg Config, log *slog.Logger, known func() []waitroom.Known,
	onAdmit func(string, []waitroom.Admission), onTick func(string, waitroom.TickResult)) (*waitroom.Rooms, error) {
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
		OnTick:       onTick,
		Logger:       log,
	})
	if err != nil {
		return nil, fmt.Errorf("config: waiting_room: %w", err)
	}
	return rooms, nil
}

// roomTick is what the dashboard's ring takes of a room's tick: the room's
// admitted and abandoned totals and the line's length, so the ring has
// them for every second, a dashboard open or not.
func roomTick(res waitroom.TickResult) ui.RoomTick {
	return ui.RoomTick{Admitted: res.Admitted, Abandoned: res.Skipped, Waiting: &res.Waiting}
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
