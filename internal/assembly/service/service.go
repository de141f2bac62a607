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
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/keyspace"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/waitroom"
)

// KeyPrefix is the Redis key prefix of everything the service keeps.
const KeyPrefix = keyspace.DefaultPrefix

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
	api         *httpapi.Server // its dashboard sampling stops after the HTTP server; its event streams end when the watcher stops
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
	actx, cancel := context.WithTimeout(ctx, DrainTimeout)
	if err := s.api.Stop(actx); err != nil {
		s.log.Warn("stopping the dashboard's sampling", "err", err)
	}
	cancel()
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
	if s.api != nil {
		wctx, cancel := context.WithTimeout(ctx, SchedulerStopTimeout)
		if err := s.api.WaitStreams(wctx); err != nil {
			s.log.Warn("ending the waiting-room event streams", "err", err)
		}
		cancel()
	}
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
