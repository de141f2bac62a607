package stream

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/rueidis"
)

// Registry runs one pool per key (a promotion id) in this process. Pools
// start on demand (Ensure), stop themselves when idle and drained, and start
// again when new work arrives; one lock and a generation number per pool make
// an idle stop, an explicit Stop and new work racing each other safe.
type Registry struct {
	client   rueidis.Client
	instance string
	cfg      Config
	token    string        // lease value shared by this registry's pools
	blocking chan struct{} // XREADGROUP BLOCK slots across all pools

	mu     sync.Mutex
	gen    uint64
	closed bool
	pools  map[string]*Pool // running pools
	// stopping holds the newest stopping pool of each key, until it is done.
	// A pool is done only after every earlier pool of its key (see
	// startAfter), so waiting for this one waits for all of them.
	stopping map[string]*Pool
}

// NewRegistry returns a registry whose pools use client and cfg; instance
// names this process in consumer names.
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
		pools:    make(map[string]*Pool), stopping: make(map[string]*Pool),
	}, nil
}

// Ensure starts the pool for key if it is not running and returns true if it
// started one. When the pool runs it is woken instead (see Wake), which also
// calls off an idle stop being decided at that moment; a pool that already
// stopped itself is started again, after every earlier pool of key is done
// (one whose Stop timed out may still be finishing a handler). Starting is
// asynchronous: group creation and leases happen in the background, and a
// failure there is logged and leaves the key free for the next Ensure.
func (r *Registry) Ensure(ctx context.Context, key string, spec Spec) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false, ErrShutdown
	}
	if p := r.pools[key]; p != nil {
		if !p.closing.Load() {
			p.Wake()
			return false, nil
		}
		// It is stopping by itself (lost its leases): replace it.
		delete(r.pools, key)
		r.stopping[key] = p
	}
	p, err := newPool(r.client, r.instance, spec, r.cfg, r.token, r.blocking)
	if err != nil {
		return false, err
	}
	r.gen++
	p.gen = r.gen
	p.gate = r.idleGate(key)
	p.onStopped = r.stopped(key)
	p.startAfter(r.stopping[key])
	r.pools[key] = p
	return true, nil
}

// idleGate commits an idle stop of key's pool under the registry lock: only
// if the pool is still the current one for key and no Ensure or Wake came
// since the pool read its group state.
func (r *Registry) idleGate(key string) func(p *Pool, seq uint64) bool {
	return func(p *Pool, seq uint64) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.pools[key] != p || p.gen == 0 || p.wakeSeq.Load() != seq || p.closing.Load() {
			return false
		}
		p.closing.Store(true)
		delete(r.pools, key)
		r.stopping[key] = p
		return true
	}
}

// stopped forgets key's pool p once it is done (whatever stopped it).
func (r *Registry) stopped(key string) func(p *Pool) {
	return func(p *Pool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.pools[key] == p {
			delete(r.pools, key)
		}
		if r.stopping[key] == p {
			delete(r.stopping, key)
		}
	}
}

// Wake tells key's running pool that new work exists; no-op if it is not
// running.
func (r *Registry) Wake(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.pools[key]; p != nil {
		p.Wake()
	}
}

// Running reports whether key's pool is running (started and not stopping).
func (r *Registry) Running(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pools[key]
	return p != nil && !p.closing.Load()
}

// Pool returns key's running pool, or nil.
func (r *Registry) Pool(key string) *Pool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pools[key]
}

// Stop stops key's pool (see Pool.Stop) and waits until ctx is done for it
// and for any earlier pool of key still stopping (whose handlers are
// cancelled too at ctx's deadline). Idempotent; safe concurrently with the
// pool's own idle stop.
func (r *Registry) Stop(ctx context.Context, key string) error {
	r.mu.Lock()
	p := r.pools[key]
	if p != nil {
		delete(r.pools, key)
		r.stopping[key] = p
	} else {
		p = r.stopping[key]
	}
	r.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Stop(ctx)
}

// Shutdown stops every pool: reading stops everywhere, handlers in flight
// may finish until ctx's deadline, and whatever is unfinished stays pending
// for the next start. Ensure fails with ErrShutdown afterwards. Idempotent.
func (r *Registry) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	all := make([]*Pool, 0, len(r.pools)+len(r.stopping))
	for key, p := range r.pools {
		delete(r.pools, key)
		if prev := r.stopping[key]; prev != nil {
			all = append(all, prev)
		}
		r.stopping[key] = p
	}
	for _, p := range r.stopping {
		all = append(all, p)
	}
	r.mu.Unlock()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, p := range all {
		wg.Go(func() { errs[i] = p.Stop(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
