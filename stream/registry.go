package stream

import (
	"context"
	"errors"
	"sync"

	"github.com/dibsio/dibs/internal/startstop"
	"github.com/redis/rueidis"
)

// Registry runs one pool per key (a promotion id) in this process. Run
// makes sure a key's pool runs: it wakes a running pool and starts one
// otherwise. Pools stop themselves when idle and drained, and Run starts
// them again when new work arrives; a pool's own lock orders a Wake against
// its idle stop, so new work is never left to a pool that is stopping.
//
// The registry talks to its pools through their methods only. Its own
// goroutine starts with the first Run; Stop stops every pool through it.
type Registry struct {
	// Set by NewRegistry; read-only afterwards.
	client   rueidis.Client
	instance string
	cfg      Config
	token    string        // lease value shared by this registry's pools
	blocking chan struct{} // XREADGROUP BLOCK slots across all pools

	// life runs the loop that, on Stop, stops every pool and waits for
	// them. It starts with the first Run; Stop before that only ends it.
	life startstop.Base

	mu sync.Mutex // guards pools
	// pools holds the newest pool of each key: running, stopping, or done
	// and not yet pruned. A pool is done only after every earlier pool of
	// its key (see Pool.startAfter), so the newest one stands for all.
	// Written by Run and by the loop on Stop; read by every method.
	pools map[string]*Pool
}

// NewRegistry returns a registry whose pools use client and cfg; instance
// names this process in consumer names. It starts nothing.
func NewRegistry(client rueidis.Client, instance string, cfg Config) (*Registry, error) {
	if client == nil {
		return nil, errors.New("stream: client is required")
	}
	if instance == "" {
		return nil, errors.New("stream: instance name is required")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Registry{
		client: client, instance: instance, cfg: cfg, token: newToken(),
		blocking: make(chan struct{}, cfg.MaxBlockingConns),
		pools:    make(map[string]*Pool),
	}, nil
}

// Run makes sure key's pool runs, and reports whether it started one. A
// running pool is woken instead (see Pool.Wake), which also calls off an
// idle stop being decided at that moment; a pool that stopped, or is
// stopping, is followed by a new one, which starts after every earlier pool
// of key is done (one whose Stop timed out may still be finishing a
// handler). Starting is asynchronous: group creation and leases happen in
// the background, and a failure there is logged and leaves the key free for
// the next Run. Run fails with ErrShutdown once Stop was called.
func (r *Registry) Run(ctx context.Context, key string, spec Spec) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.life.Start(r.loop); errors.Is(err, startstop.ErrStopped) {
		return false, ErrShutdown
	}
	select {
	case <-r.life.Stopping():
		return false, ErrShutdown
	default:
	}
	prev := r.pools[key]
	if prev != nil && prev.wake() {
		return false, nil
	}
	p, err := newPool(r.client, r.instance, spec, r.cfg, r.token, r.blocking)
	if err != nil {
		return false, err
	}
	r.prune()
	if prev != nil && isDone(prev) {
		prev = nil
	}
	p.startAfter(prev)
	r.pools[key] = p
	return true, nil
}

// prune forgets the pools that are done. The caller holds r.mu.
func (r *Registry) prune() {
	for key, p := range r.pools {
		if isDone(p) {
			delete(r.pools, key)
		}
	}
}

func isDone(p *Pool) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// Wake tells key's running pool that new work exists; no-op if it is not
// running. It never starts a pool: that is Run.
func (r *Registry) Wake(key string) {
	if p := r.Pool(key); p != nil {
		p.Wake()
	}
}

// Running reports whether key's pool is running (started and not stopping).
func (r *Registry) Running(key string) bool { return r.Pool(key) != nil }

// Len returns how many pools are running (started and not stopping).
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.pools {
		if !isDone(p) && !p.isClosing() {
			n++
		}
	}
	return n
}

// Pool returns key's running pool, or nil.
func (r *Registry) Pool(key string) *Pool {
	r.mu.Lock()
	p := r.pools[key]
	r.mu.Unlock()
	if p == nil || p.isClosing() {
		return nil
	}
	return p
}

// StopPool stops key's pool (see Pool.Stop) and waits until ctx is done for
// it and for any earlier pool of key still stopping (whose handlers are
// cancelled too at ctx's deadline). The next Run of key starts a new pool.
// Idempotent; safe concurrently with the pool's own idle stop.
func (r *Registry) StopPool(ctx context.Context, key string) error {
	r.mu.Lock()
	p := r.pools[key]
	r.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Stop(ctx)
}

// Stop stops every pool: reading stops everywhere, handlers in flight may
// finish until ctx's deadline (then their contexts are cancelled and Stop
// returns ctx.Err()), and whatever is unfinished stays pending for the next
// start. Run fails with ErrShutdown afterwards. Safe to call twice, and
// before any Run.
func (r *Registry) Stop(ctx context.Context) error {
	err := r.life.Stop(ctx)
	if err != nil {
		r.mu.Lock()
		for _, p := range r.pools {
			p.cancelHandlers()
		}
		r.mu.Unlock()
	}
	return err
}

// loop is the registry's goroutine: on Stop it tells every pool to stop,
// waits until each is done, and forgets them.
func (r *Registry) loop(stopping <-chan struct{}) {
	<-stopping
	r.mu.Lock()
	all := make([]*Pool, 0, len(r.pools))
	for _, p := range r.pools {
		all = append(all, p)
	}
	r.mu.Unlock()
	for _, p := range all {
		p.beginStop()
	}
	for _, p := range all {
		<-p.Done()
	}
	r.mu.Lock()
	clear(r.pools)
	r.mu.Unlock()
}

// Config returns the configuration the registry's pools use, defaults
// filled in.
func (r *Registry) Config() Config { return r.cfg }
