package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Spec says what one pool consumes: one stream with one consumer group.
type Spec struct {
	// Stream is the stream key. Per-pool keys (consumer leases) are derived
	// from it, so they share its Cluster hash tag.
	Stream string
	// Group is the consumer group.
	Group string
	// Handler handles the entries. Required.
	Handler Handler
	// Ack acknowledges handled messages; it must XACK them, and may do more in
	// the same step (a Lua script that also records the outcome). An error
	// leaves the entries pending; they are delivered again later. After it
	// succeeded the runtime deletes the failure counts (see [FailuresKey]) of
	// the entries that had any, with one HDEL. Defaults to a plain XACK,
	// sent in one round trip with that HDEL.
	Ack func(ctx context.Context, msgs []Message) error
	// OnDeadLetter is called before an entry is written to the dead-letter
	// stream and acknowledged; an error leaves the entry pending, to be tried
	// again on a later delivery. A callback that finds the work already done
	// (a redelivered entry whose acknowledgement was lost) acknowledges it
	// itself and returns ErrResolved: no dead letter is written. The
	// callbacks for the entries of one read share one deadline of
	// Config.HandlerTimeout, carried by ctx, so a stalled database holds a
	// consumer no longer than a slow handler would; a callback cut off by it
	// fails, and its entry stays pending. Optional.
	OnDeadLetter func(ctx context.Context, d DeadLetter) error
	// DeadLetterStream is where given-up entries are written, capped at about
	// Config.DeadLetterMaxLen entries (XADD MAXLEN ~): it is a recent tail,
	// and OnDeadLetter the place to keep every dead letter. Defaults to
	// Stream + ":dlq".
	DeadLetterStream string
	// ExpectedTotal is how many entries the stream is expected to carry; it
	// sets the initial consumer count (InitialConsumers). Defaults to 0, which
	// starts MinConsumers.
	ExpectedTotal int64
}

func (s Spec) withDefaults() Spec {
	if s.DeadLetterStream == "" {
		s.DeadLetterStream = s.Stream + ":dlq"
	}
	return s
}

func (s Spec) validate() error {
	switch {
	case s.Stream == "":
		return errors.New("stream: Spec.Stream is required")
	case s.Group == "":
		return errors.New("stream: Spec.Group is required")
	case s.Handler == nil:
		return errors.New("stream: Spec.Handler is required")
	case s.DeadLetterStream == s.Stream:
		return errors.New("stream: Spec.DeadLetterStream must differ from Spec.Stream")
	}
	return nil
}

// LeaseKey is the key of the lease on a consumer name of stream. It starts
// with the stream key, so it lives in the stream's Cluster slot when the
// stream key has a hash tag.
func LeaseKey(stream, consumer string) string { return stream + ":lease:" + consumer }

// FailuresKey is the key of the hash that counts, per entry id, the handler
// failures of group's entries of stream that count towards
// Config.MaxDeliveries (see Message.Failures). It starts with the stream key,
// so it lives in the stream's Cluster slot when the stream key has a hash
// tag. A field is written when a handler call fails with an error of no kind
// and deleted when the entry is acknowledged or dead-lettered; the reclaim
// pass deletes the fields of entries that are no longer pending by other
// means, so the hash holds at most about one field per pending entry.
func FailuresKey(stream, group string) string { return stream + ":failures:" + group }

// ConsumerName is the consumer name with index i of an instance.
func ConsumerName(instance string, i int) string {
	return instance + "-consumer-" + strconv.Itoa(i)
}

// Pool runs the consumers of one stream and group in this process: it reads
// with XREADGROUP, hands the entries to the handler, acknowledges what
// succeeded, reclaims what dead consumers left, dead-letters what cannot
// succeed, scales between MinConsumers and MaxConsumers, and stops by itself
// once idle and drained.
type Pool struct {
	client      rueidis.Client
	instance    string
	spec        Spec
	cfg         Config
	log         *slog.Logger
	policy      ScalePolicy
	token       string        // lease value: identifies this process
	failuresKey string        // FailuresKey of the stream and group
	leaseMu     sync.Mutex    // serialises lease renewal passes with lease releases
	blocking    chan struct{} // slots for XREADGROUP BLOCK, shared by a registry's pools

	// Set by the registry before start; read-only afterwards.
	gen       uint64
	gate      func(p *Pool, seq uint64) bool // commits an idle stop; nil: the pool decides alone
	onStopped func(p *Pool)

	// prev is the pool of the same key that was stopping when this one was
	// made; this pool starts, and is done, only after it. Written by
	// startAfter, cleared once prev is done; read by Stop.
	prev atomic.Pointer[Pool]

	readCtx    context.Context // cancelled by Stop: interrupts reads
	readCancel context.CancelFunc
	hardCtx    context.Context // cancelled when Stop's deadline passes: handlers and acks
	hardCancel context.CancelFunc
	stopCh     chan struct{} // closed when consumers must stop reading
	stopOnce   sync.Once
	done       chan struct{} // closed when every goroutine of the pool has returned

	state       atomic.Int32 // poolNew, poolRunning, poolStopped
	closing     atomic.Bool  // set once a stop has begun; read by the registry
	idleStopped atomic.Bool  // the pool stopped itself after its idle timeout

	wakeSeq     atomic.Uint64 // bumped by Wake; an idle stop commits only if unchanged
	kick        chan struct{} // wakes the poller from its sleep (size 1)
	lastMsg     atomic.Int64  // unix ns of the last message any consumer got
	nextReclaim atomic.Int64  // unix ns when the next reclaim pass is due
	pausedUntil atomic.Int64  // unix ns until which no consumer reads (transient failures)
	poller      atomic.Int32  // index+1 of the consumer that polls an empty stream

	baton chan struct{} // size 1: wakes one parked consumer to take over polling

	mu            sync.Mutex // guards the fields below
	consumers     map[int]*consumer
	parkCh        chan struct{} // closed and replaced to wake every parked consumer
	renewed       chan struct{} // closed and replaced after each heartbeat pass
	scale         ScaleState
	lastIdleCheck time.Time

	wg sync.WaitGroup // consumer goroutines; waited by the supervisor
}

const (
	poolNew int32 = iota
	poolRunning
	poolStopped
)

// consumer is one consumer goroutine's identity.
type consumer struct {
	idx      int
	name     string
	leaseKey string
	quit     chan struct{} // closed to stop this consumer alone
	quitOnce sync.Once
	lost     chan struct{} // closed when another process holds the lease
	lostOnce sync.Once

	// validUntil is the Clock time (unix ns) until which the lease is surely
	// held: written by leaseNext and the heartbeat, read by the consumer
	// before each command it sends under its name.
	validUntil atomic.Int64
}

func (c *consumer) stop() { c.quitOnce.Do(func() { close(c.quit) }) }

// loseLease records that another process holds c's name, and stops c.
func (c *consumer) loseLease() {
	c.lostOnce.Do(func() { close(c.lost) })
	c.stop()
}

// hasLost reports whether c lost its lease.
func (c *consumer) hasLost() bool {
	select {
	case <-c.lost:
		return true
	default:
		return false
	}
}

// NewPool returns a pool for spec; instance names this process (consumer
// names are instance-consumer-i). The pool does nothing until Start.
func NewPool(client rueidis.Client, instance string, spec Spec, cfg Config) (*Pool, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newPool(client, instance, spec, cfg, newToken(), make(chan struct{}, cfg.MaxBlockingConns))
}

func newPool(client rueidis.Client, instance string, spec Spec, cfg Config, token string, blocking chan struct{}) (*Pool, error) {
	if client == nil {
		return nil, errors.New("stream: client is required")
	}
	if instance == "" {
		return nil, errors.New("stream: instance name is required")
	}
	spec = spec.withDefaults()
	if err := spec.validate(); err != nil {
		return nil, err
	}
	p := &Pool{
		client: client, instance: instance, spec: spec, cfg: cfg, token: token, blocking: blocking,
		failuresKey: FailuresKey(spec.Stream, spec.Group),
		log:         cfg.Logger.With("stream", spec.Stream, "group", spec.Group),
		policy: ScalePolicy{
			Min: cfg.MinConsumers, Max: cfg.MaxConsumers,
			ActiveTrigger: cfg.ConsecutiveActiveTrigger, IdleTrigger: cfg.ConsecutiveIdleTrigger,
			StartMinInterval: cfg.StartConsumerMinInterval, StopMinInterval: cfg.StopConsumerMinInterval,
		},
		stopCh:    make(chan struct{}),
		done:      make(chan struct{}),
		kick:      make(chan struct{}, 1),
		baton:     make(chan struct{}, 1),
		consumers: make(map[int]*consumer),
		parkCh:    make(chan struct{}),
		renewed:   make(chan struct{}),
	}
	p.readCtx, p.readCancel = context.WithCancel(context.Background())
	p.hardCtx, p.hardCancel = context.WithCancel(context.Background())
	return p, nil
}

func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Start creates the group if needed, leases the initial consumer names and
// starts the consumers. It fails with ErrLeaseUnavailable when every name
// is held by other live processes, and on a second call.
func (p *Pool) Start(ctx context.Context) error {
	if !p.state.CompareAndSwap(poolNew, poolRunning) {
		return errors.New("stream: pool already started or stopped")
	}
	if err := p.setup(ctx); err != nil {
		p.finish()
		return err
	}
	p.launch()
	return nil
}

// startAfter starts the pool in the background once prev (a pool of the same
// key that is still stopping) is done, so two pools of one process never use
// the same consumer names at once. A pool stopped before it began is still
// done only after prev: its Done then stands for every earlier pool of the
// key, which is what lets the registry remember only the newest one. Setup
// errors are logged; the pool then stops and reports through onStopped.
func (p *Pool) startAfter(prev *Pool) {
	p.state.Store(poolRunning)
	p.prev.Store(prev)
	go func() {
		if prev != nil {
			select {
			case <-prev.Done():
			case <-p.stopCh:
				// prev was told to stop before this pool was made, so
				// it ends once its handlers return.
				<-prev.Done()
				p.prev.Store(nil)
				p.finish()
				return
			}
			p.prev.Store(nil)
		}
		if err := p.setup(p.readCtx); err != nil {
			if !p.closing.Load() {
				p.log.Error("stream pool failed to start", "err", err)
				p.hookFailure(FailureRedis)
			}
			p.finish()
			return
		}
		p.launch()
	}()
}

// setup creates the group and leases the initial consumers.
func (p *Pool) setup(ctx context.Context) error {
	if err := CreateGroup(ctx, p.client, p.spec.Stream, p.spec.Group); err != nil {
		return err
	}
	want := InitialConsumers(p.spec.ExpectedTotal, p.cfg.MinConsumers, p.cfg.MaxConsumers)
	for range want {
		c, err := p.leaseNext(ctx)
		if err != nil {
			// Give back the names taken so far: no consumer will run under
			// them, and a restart should find them free at once.
			p.mu.Lock()
			taken := make([]*consumer, 0, len(p.consumers))
			for idx, c := range p.consumers {
				taken = append(taken, c)
				delete(p.consumers, idx)
			}
			p.mu.Unlock()
			for _, c := range taken {
				p.releaseLease(c)
			}
			return err
		}
		if c == nil {
			break
		}
		p.mu.Lock()
		p.consumers[c.idx] = c
		p.mu.Unlock()
	}
	p.mu.Lock()
	n := len(p.consumers)
	p.mu.Unlock()
	if n == 0 {
		return fmt.Errorf("%w: instance %s on %s", ErrLeaseUnavailable, p.instance, p.spec.Stream)
	}
	return nil
}

// leaseNext leases the lowest consumer index this pool does not run and no
// other process holds; nil when none is free within the scan range.
func (p *Pool) leaseNext(ctx context.Context) (*consumer, error) {
	limit := 2*p.cfg.MaxConsumers + 8
	for i := 0; i < limit; i++ {
		p.mu.Lock()
		_, mine := p.consumers[i]
		p.mu.Unlock()
		if mine {
			continue
		}
		name := ConsumerName(p.instance, i)
		key := LeaseKey(p.spec.Stream, name)
		start := p.cfg.Clock.Now()
		ok, err := leaseScript.Exec(ctx, p.client, []string{key},
			[]string{p.token, strconv.FormatInt(p.cfg.LeaseTTL.Milliseconds(), 10)}).AsInt64()
		if err != nil {
			return nil, fmt.Errorf("stream: lease %s: %w", key, err)
		}
		if ok == 1 {
			c := &consumer{idx: i, name: name, leaseKey: key, quit: make(chan struct{}), lost: make(chan struct{})}
			c.validUntil.Store(p.leaseValidUntil(start))
			return c, nil
		}
	}
	return nil, nil
}

// launch starts the consumers, the lease heartbeat and the supervisor that
// cleans up once they are all done.
func (p *Pool) launch() {
	now := p.cfg.Clock.Now()
	p.lastMsg.Store(now.UnixNano())
	p.nextReclaim.Store(now.UnixNano())
	p.mu.Lock()
	cs := make([]*consumer, 0, len(p.consumers))
	for _, c := range p.consumers {
		cs = append(cs, c)
	}
	p.scale.Consumers = len(cs)
	p.wg.Add(len(cs))
	p.mu.Unlock()
	p.hookConsumers(len(cs))
	for _, c := range cs {
		go p.runConsumer(c)
	}
	// The heartbeat outlives the stop signal: consumers finishing their
	// handlers still need a live lease to acknowledge.
	var hb sync.WaitGroup
	hbStop := make(chan struct{})
	hb.Add(1)
	go func() {
		defer hb.Done()
		p.heartbeat(hbStop)
	}()
	go func() {
		<-p.stopCh
		p.wg.Wait()
		close(hbStop)
		hb.Wait()
		p.finish()
	}()
}

// finish marks the pool stopped and tells the registry, before Done: once
// Done is closed the registry no longer lists the pool.
func (p *Pool) finish() {
	p.state.Store(poolStopped)
	p.beginStop()
	p.readCancel()
	p.hardCancel()
	if p.onStopped != nil {
		p.onStopped(p)
	}
	close(p.done)
}

// beginStop tells every consumer to stop reading.
func (p *Pool) beginStop() {
	p.stopOnce.Do(func() {
		p.closing.Store(true)
		close(p.stopCh)
	})
}

// Stop stops reading, lets handlers in flight finish until ctx is done, and
// leaves whatever is unfinished pending for a later delivery. At ctx's
// deadline the handlers' contexts are cancelled and Stop returns ctx.Err();
// Done tells when the last goroutine has returned. Safe to call twice,
// concurrently, or before Start.
func (p *Pool) Stop(ctx context.Context) error {
	if p.state.CompareAndSwap(poolNew, poolStopped) {
		p.beginStop()
		p.readCancel()
		p.hardCancel()
		close(p.done)
		return nil
	}
	p.beginStop()
	p.readCancel()
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		// This pool waits for the earlier pools of its key: their handlers
		// are cancelled too.
		for q := p; q != nil; q = q.prev.Load() {
			q.hardCancel()
		}
		return ctx.Err()
	}
}

// Done is closed once the pool has stopped and all its goroutines returned.
func (p *Pool) Done() <-chan struct{} { return p.done }

// IdleStopped reports whether the pool stopped itself after its idle timeout.
func (p *Pool) IdleStopped() bool { return p.idleStopped.Load() }

// Consumers returns the number of consumers running now.
func (p *Pool) Consumers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.consumers)
}

// Wake tells the pool that new entries exist: the consumer polling an empty
// stream reads at once instead of finishing its sleep, and an idle stop that
// is being decided is called off.
func (p *Pool) Wake() {
	p.wakeSeq.Add(1)
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// stopping reports whether consumer c must return.
func (p *Pool) stopping(c *consumer) bool {
	select {
	case <-p.stopCh:
		return true
	case <-c.quit:
		return true
	default:
		return false
	}
}

// sleep waits d; false if c must stop meanwhile. A Wake cuts it short when
// kickable.
func (p *Pool) sleep(c *consumer, d time.Duration, kickable bool) bool {
	if d <= 0 {
		return !p.stopping(c)
	}
	var kick chan struct{}
	if kickable {
		kick = p.kick
	}
	select {
	case <-p.cfg.Clock.After(d):
	case <-kick:
	case <-p.stopCh:
		return false
	case <-c.quit:
		return false
	}
	return true
}

// parkChan returns the channel closed by the next wakeParked.
func (p *Pool) parkChan() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.parkCh
}

// wakeParked lets every parked consumer read again.
func (p *Pool) wakeParked() {
	p.mu.Lock()
	close(p.parkCh)
	p.parkCh = make(chan struct{})
	p.mu.Unlock()
}

// passBaton wakes one parked consumer, which reads at once and then takes
// over polling. If none is parked the token waits for the next consumer to
// park; such a stale token costs one extra read, never a missed one.
func (p *Pool) passBaton() {
	select {
	case p.baton <- struct{}{}:
	default:
	}
}

// takePoller makes c the one consumer that keeps reading an empty stream;
// false if another consumer already is.
func (p *Pool) takePoller(c *consumer) bool {
	id := int32(c.idx + 1)
	return p.poller.Load() == id || p.poller.CompareAndSwap(0, id)
}

// releasePoller gives up the poller role if c has it, and reports whether it
// had.
func (p *Pool) releasePoller(c *consumer) bool {
	return p.poller.CompareAndSwap(int32(c.idx+1), 0)
}

// runConsumer is one consumer's loop: drain its own pending entries, then read
// new ones; when the stream is empty, one consumer polls and the rest park.
func (p *Pool) runConsumer(c *consumer) {
	defer p.wg.Done()
	defer p.consumerExit(c)
	if !p.drainOwn(c) {
		return
	}
	empty := 0    // empty reads in a row by this consumer
	failures := 0 // failed reads in a row
	for {
		if p.stopping(c) || !p.waitPause(c) {
			return
		}
		p.maybeReclaim(c)
		if p.stopping(c) {
			return
		}
		var block time.Duration
		if empty > 0 {
			park := p.parkChan()
			if !p.takePoller(c) {
				select {
				case <-park:
					empty = 0
					continue
				case <-p.baton:
					empty = 0
					continue
				case <-p.stopCh:
					return
				case <-c.quit:
					return
				}
			}
			if p.idleCheck() {
				return
			}
			if p.cfg.ReadMode == ReadBlock && p.takeBlockingSlot() {
				block = p.cfg.Block
			} else if !p.sleep(c, pollDelay(empty, p.cfg.PollInterval), true) {
				return
			}
		}
		left, ok := p.holdLease(c, false)
		if !ok {
			if block > 0 {
				<-p.blocking
			}
			return
		}
		// A blocking read must not deliver entries after the lease may have
		// run out.
		block = min(block, left.Truncate(time.Millisecond))
		entries, err := p.readNew(c, block)
		if block > 0 {
			<-p.blocking
		}
		if err != nil {
			if p.stopping(c) {
				return
			}
			failures++
			p.hookFailure(FailureRedis)
			p.log.Warn("stream read failed", "consumer", c.name, "err", err)
			if isNoGroup(err) {
				if err := CreateGroup(p.readCtx, p.client, p.spec.Stream, p.spec.Group); err != nil {
					p.log.Warn("stream group re-creation failed", "err", err)
				}
			}
			if !p.sleep(c, backoff(failures, p.cfg.PollInterval, 5*time.Second), false) {
				return
			}
			continue
		}
		failures = 0
		if h := p.cfg.Hooks.Read; h != nil {
			h(p.spec.Stream, len(entries))
		}
		full := len(entries) >= p.cfg.BatchSize
		p.applyScale(full)
		if len(entries) == 0 {
			empty++
			continue
		}
		empty = 0
		// Work was found: hand the poller role on, so a parked consumer
		// keeps reading while this one handles the batch. A full batch
		// means a backlog, which wants every consumer; a partial one only
		// needs a single successor, and waking all of them would cost one
		// read per consumer for every entry of a trickle.
		released := p.releasePoller(c)
		switch {
		case full:
			p.wakeParked()
		case released:
			p.passBaton()
		}
		p.lastMsg.Store(p.cfg.Clock.Now().UnixNano())
		p.handle(c, toMessages(entries, 1))
	}
}

// takeBlockingSlot takes one of the registry's blocking-read slots if free.
func (p *Pool) takeBlockingSlot() bool {
	select {
	case p.blocking <- struct{}{}:
		return true
	default:
		return false
	}
}

// readNew reads entries never delivered (">"), blocking up to block if
// positive.
func (p *Pool) readNew(c *consumer, block time.Duration) ([]rueidis.XRangeEntry, error) {
	return p.read(c, ">", block)
}

func (p *Pool) read(c *consumer, id string, block time.Duration) ([]rueidis.XRangeEntry, error) {
	cl := p.client
	var cmd rueidis.Completed
	if block > 0 {
		cmd = cl.B().Xreadgroup().Group(p.spec.Group, c.name).Count(int64(p.cfg.BatchSize)).
			Block(block.Milliseconds()).Streams().Key(p.spec.Stream).Id(id).Build()
	} else {
		cmd = cl.B().Xreadgroup().Group(p.spec.Group, c.name).Count(int64(p.cfg.BatchSize)).
			Streams().Key(p.spec.Stream).Id(id).Build()
	}
	res, err := cl.Do(p.readCtx, cmd).AsXRead()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream: XREADGROUP %s: %w", p.spec.Stream, err)
	}
	return res[p.spec.Stream], nil
}

// drainOwn hands the consumer's own pending entries (left by an earlier run
// under the same name) to the handler before anything new; false if the
// consumer must stop.
func (p *Pool) drainOwn(c *consumer) bool {
	cursor := "0"
	for !p.stopping(c) {
		if _, ok := p.holdLease(c, false); !ok {
			return false
		}
		entries, err := p.read(c, cursor, 0)
		if err != nil {
			if p.stopping(c) {
				return false
			}
			// The reclaim pass picks these entries up later.
			p.hookFailure(FailureRedis)
			p.log.Warn("stream pending drain failed", "consumer", c.name, "err", err)
			return true
		}
		if len(entries) == 0 {
			return true
		}
		cursor = entries[len(entries)-1].ID
		msgs := toMessages(entries, 1)
		if err := p.deliveryCounts(p.hardCtx, msgs); err != nil {
			p.log.Warn("stream delivery counts unavailable", "err", err)
		}
		p.lastMsg.Store(p.cfg.Clock.Now().UnixNano())
		p.handle(c, msgs)
	}
	return false
}

// waitPause waits out a pause set after a transient failure.
func (p *Pool) waitPause(c *consumer) bool {
	until := p.pausedUntil.Load()
	if until == 0 {
		return true
	}
	d := time.Duration(until - p.cfg.Clock.Now().UnixNano())
	return p.sleep(c, d, false)
}

// pause stops all consumers of the pool from reading for d.
func (p *Pool) pause(d time.Duration) {
	until := p.cfg.Clock.Now().Add(d).UnixNano()
	for {
		cur := p.pausedUntil.Load()
		if cur >= until || p.pausedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// applyScale feeds one read into the scaling policy and applies its decision.
func (p *Pool) applyScale(full bool) {
	if p.cfg.MinConsumers == p.cfg.MaxConsumers {
		return
	}
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	p.scale.Consumers = len(p.consumers)
	s, act := p.policy.Next(p.scale, full, now)
	p.scale = s
	var victim *consumer
	if act == ScaleDown {
		for _, c := range p.consumers {
			if victim == nil || c.idx > victim.idx {
				victim = c
			}
		}
	}
	p.mu.Unlock()
	switch act {
	case ScaleUp:
		p.addConsumer()
	case ScaleDown:
		if victim != nil {
			p.log.Debug("stream pool scaling down", "consumer", victim.name)
			victim.stop()
		}
	}
}

// addConsumer leases one more consumer name and starts its goroutine.
func (p *Pool) addConsumer() {
	c, err := p.leaseNext(p.readCtx)
	if err != nil || c == nil {
		if err != nil && !p.closing.Load() {
			p.log.Warn("stream pool could not add a consumer", "err", err)
		}
		return
	}
	p.mu.Lock()
	if p.closing.Load() || len(p.consumers) >= p.cfg.MaxConsumers {
		p.mu.Unlock()
		p.releaseLease(c)
		return
	}
	p.consumers[c.idx] = c
	n := len(p.consumers)
	p.wg.Add(1)
	p.mu.Unlock()
	p.log.Debug("stream pool scaling up", "consumer", c.name)
	p.hookConsumers(n)
	go p.runConsumer(c)
}

// consumerExit removes c: gives up the poller role, deletes the consumer from
// the group if it holds nothing, and releases its lease.
func (p *Pool) consumerExit(c *consumer) {
	// Another consumer must take over polling. Wake the parked ones even if
	// c was not the poller right now: it may have handed the role on after a
	// read that found work, and with c gone nobody else would wake them.
	p.releasePoller(c)
	p.wakeParked()
	p.mu.Lock()
	delete(p.consumers, c.idx)
	n := len(p.consumers)
	p.mu.Unlock()
	p.hookConsumers(n)
	if c.hasLost() {
		// The name is another process's now, and so are its entries.
		if n == 0 {
			p.beginStop()
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := delConsumerScript.Exec(ctx, p.client, []string{p.spec.Stream},
		[]string{p.spec.Group, c.name}).Error(); err != nil {
		p.log.Warn("stream consumer removal failed", "consumer", c.name, "err", err)
	}
	p.releaseLease(c)
	if n == 0 {
		// Every consumer is gone (leases lost): the pool cannot work.
		p.beginStop()
	}
}

func (p *Pool) releaseLease(c *consumer) {
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := releaseScript.Exec(ctx, p.client, []string{c.leaseKey}, []string{p.token}).Error(); err != nil {
		p.log.Warn("stream lease release failed", "consumer", c.name, "err", err)
	}
}

// leaseSafety is the part of LeaseTTL a consumer does not count on: it
// covers the time between checking the lease and a command reaching Redis,
// and clock drift between this process and Redis.
func leaseSafety(ttl time.Duration) time.Duration { return ttl / 5 }

// leaseValidUntil is when a lease taken or renewed by a call sent at start
// stops being safe to rely on (unix ns). Counting from the call's start, not
// its reply, errs on the safe side: Redis set the expiry later than that.
func (p *Pool) leaseValidUntil(start time.Time) int64 {
	return start.Add(p.cfg.LeaseTTL - leaseSafety(p.cfg.LeaseTTL)).UnixNano()
}

// heartbeat renews the leases of all consumers every LeaseTTL/3, extends
// their validity, and stops a consumer whose name another process took
// over. It runs until stop is closed, after the last consumer returned.
func (p *Pool) heartbeat(stop <-chan struct{}) {
	ttl := strconv.FormatInt(p.cfg.LeaseTTL.Milliseconds(), 10)
	for {
		select {
		case <-stop:
			return
		case <-p.cfg.Clock.After(p.cfg.LeaseTTL / 3):
		}
		p.renewLeases(ttl)
		// Wake consumers waiting for a renewal, whatever its outcome: each
		// checks its own lease again.
		p.mu.Lock()
		close(p.renewed)
		p.renewed = make(chan struct{})
		p.mu.Unlock()
	}
}

// renewLeases is one heartbeat pass.
func (p *Pool) renewLeases(ttl string) {
	// A release must not land between this pass's listing of the consumers
	// and its SET: the script would lease the freed name again.
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	p.mu.Lock()
	cs := make([]*consumer, 0, len(p.consumers))
	for _, c := range p.consumers {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	if len(cs) == 0 {
		return
	}
	execs := make([]rueidis.LuaExec, len(cs))
	for i, c := range cs {
		execs[i] = rueidis.LuaExec{Keys: []string{c.leaseKey}, Args: []string{p.token, ttl}}
	}
	start := p.cfg.Clock.Now()
	// hardCtx, not readCtx: renewals go on while handlers finish after Stop.
	// Each pass is bounded: with Redis down, rueidis would retry the call
	// for as long as the context lives, and a renewal that lands later than
	// this is worth nothing anyway (validity counts from start).
	ctx, cancel := context.WithTimeout(p.hardCtx, p.cfg.LeaseTTL/3)
	defer cancel()
	for i, r := range leaseScript.ExecMulti(ctx, p.client, execs...) {
		held, err := r.AsInt64()
		if err != nil {
			if p.hardCtx.Err() == nil {
				p.hookFailure(FailureRedis)
				p.log.Warn("stream lease renewal failed", "consumer", cs[i].name, "err", err)
			}
			continue
		}
		if held == 0 {
			p.hookFailure(FailureLease)
			p.log.Error("stream consumer lost its lease to another process; stopping it", "consumer", cs[i].name)
			cs[i].loseLease()
			continue
		}
		cs[i].validUntil.Store(p.leaseValidUntil(start))
	}
}

// renewedChan returns the channel closed after the next heartbeat pass.
func (p *Pool) renewedChan() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.renewed
}

// holdLease waits until c may send a command under its name: its lease is
// known to be held for at least another millisecond. It returns how long the
// lease stays valid, so a blocking read can end before it. When the validity
// ran out (renewals failing, or the process froze longer than the lease),
// the consumer sends nothing until a heartbeat renews the lease: another
// process may own the name by now. It reports false if the lease was lost,
// the pool's hard stop came, or (for reads, ack false) c must stop reading.
// A stopping pool waits for one heartbeat pass at most, so a Stop without a
// deadline does not hang on an unreachable Redis; the entries stay pending.
func (p *Pool) holdLease(c *consumer, ack bool) (time.Duration, bool) {
	var stop, quit <-chan struct{}
	if !ack {
		stop, quit = p.stopCh, c.quit
	}
	waited, passed := false, false
	for {
		if c.hasLost() {
			return 0, false
		}
		renewed := p.renewedChan() // before the check, so no renewal is missed
		if left := time.Duration(c.validUntil.Load() - p.cfg.Clock.Now().UnixNano()); left >= time.Millisecond {
			return left, true
		}
		if passed && p.closing.Load() {
			return 0, false
		}
		if !waited {
			waited = true
			p.hookFailure(FailureLeaseExpired)
			p.log.Warn("stream consumer lease not renewed in time; waiting for a renewal", "consumer", c.name)
		}
		select {
		case <-renewed:
			passed = true
		case <-c.lost:
			return 0, false
		case <-p.hardCtx.Done():
			return 0, false
		case <-stop:
			return 0, false
		case <-quit:
			return 0, false
		}
	}
}

// idleCheck stops the pool when it has had no message for IdleTimeout and
// its group has nothing pending and nothing undelivered. Called by the
// polling consumer only. It reports whether the pool is stopping.
func (p *Pool) idleCheck() bool {
	if p.cfg.IdleTimeout < 0 {
		return false
	}
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	due := idleDue(now, time.Unix(0, p.lastMsg.Load()), p.lastIdleCheck, p.cfg.IdleTimeout)
	if due {
		p.lastIdleCheck = now
	}
	p.mu.Unlock()
	if !due {
		return false
	}
	seq := p.wakeSeq.Load()
	gi, err := readGroup(p.readCtx, p.client, p.spec.Stream, p.spec.Group)
	if err != nil {
		p.log.Warn("stream idle check failed", "err", err)
		return false
	}
	if h := p.cfg.Hooks.Lag; h != nil {
		h(p.spec.Stream, gi.lag, gi.pending)
	}
	if gi.pending != 0 || gi.lag != 0 {
		return false
	}
	if !p.commitIdle(seq) {
		return false
	}
	p.idleStopped.Store(true)
	p.log.Info("stream pool idle and drained; stopping", "idle_timeout", p.cfg.IdleTimeout)
	p.beginStop()
	return true
}

// commitIdle decides an idle stop: only if no Wake came since seq was read.
func (p *Pool) commitIdle(seq uint64) bool {
	if p.gate != nil {
		return p.gate(p, seq)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wakeSeq.Load() != seq || p.closing.Load() {
		return false
	}
	p.closing.Store(true)
	return true
}

// maybeReclaim runs the reclaim pass on consumer c if it is due and no other
// consumer of the pool took it.
func (p *Pool) maybeReclaim(c *consumer) {
	now := p.cfg.Clock.Now().UnixNano()
	next := p.nextReclaim.Load()
	if now < next || !p.nextReclaim.CompareAndSwap(next, now+int64(p.cfg.ReclaimInterval)) {
		return
	}
	p.reclaim(c)
}

// reclaim takes over entries pending longer than ReclaimMinIdle (their
// consumer died, or their handler failed) and hands them to the handler with
// their delivery counts; then trims acknowledged entries and samples lag.
func (p *Pool) reclaim(c *consumer) {
	ctx := p.hardCtx
	cursor := "0-0"
	for range 16 {
		if _, ok := p.holdLease(c, false); !ok {
			return
		}
		msgs, deleted, next, err := p.xautoclaim(ctx, c.name, cursor)
		if err != nil {
			if !p.closing.Load() {
				p.hookFailure(FailureRedis)
				p.log.Warn("stream reclaim failed", "err", err)
			}
			break
		}
		if len(deleted) > 0 {
			p.deadLetterDeleted(ctx, deleted)
		}
		if len(msgs) > 0 {
			if err := p.deliveryCounts(ctx, msgs); err != nil {
				p.log.Warn("stream delivery counts unavailable", "err", err)
				break
			}
			p.lastMsg.Store(p.cfg.Clock.Now().UnixNano())
			p.handle(c, msgs)
		}
		if next == "0-0" || next == "" || p.stopping(c) {
			break
		}
		cursor = next
	}
	if p.stopping(c) {
		return
	}
	if n, err := p.sweepFailures(ctx); err != nil {
		p.log.Warn("stream failure-count sweep failed", "err", err)
	} else if n > 0 {
		p.log.Debug("stream failure counts of finished entries deleted", "counts", n)
	}
	if p.cfg.TrimAcked {
		if err := trimScript.Exec(ctx, p.client, []string{p.spec.Stream}, nil).Error(); err != nil {
			p.log.Warn("stream trim failed", "err", err)
		}
	}
	if h := p.cfg.Hooks.Lag; h != nil {
		if gi, err := readGroup(ctx, p.client, p.spec.Stream, p.spec.Group); err == nil {
			h(p.spec.Stream, gi.lag, gi.pending)
		}
	}
}

// reasonDeleted is the dead-letter reason of an entry deleted from the
// stream while it was pending.
const reasonDeleted = "entry deleted from the stream while pending"

// handle runs the handler on msgs and settles every entry: acknowledge,
// dead-letter, leave pending, or (transient) pause the pool and retry.
// Nothing is settled without a valid lease: if it was lost meanwhile, the
// entries stay pending for the process that holds the name now. Only handler
// failures of no kind move an entry towards the dead letters (counted in
// FailuresKey); how often Redis delivered it does not matter.
func (p *Pool) handle(c *consumer, msgs []Message) {
	ctx := context.WithValue(p.hardCtx, consumerKey{}, c.name)
	mayAck := func() bool {
		_, ok := p.holdLease(c, true)
		return ok
	}
	run := make([]Message, 0, len(msgs))
	early := p.callbackDeadline(ctx)
	defer early.release()
	for _, m := range msgs {
		switch {
		case m.Fields == nil:
			if !mayAck() {
				return
			}
			p.deadLetter(ctx, early, m, m.Failures, reasonDeleted, true)
		case m.Failures >= p.cfg.MaxDeliveries:
			// Its last counted failure was not dead-lettered (the callback
			// or Redis failed then): finish that now.
			if !mayAck() {
				return
			}
			p.deadLetter(ctx, early, m, m.Failures, fmt.Sprintf("max deliveries (%d) reached: %d handler failures", p.cfg.MaxDeliveries, m.Failures), true)
		default:
			run = append(run, m)
		}
	}
	early.release()
	for round := 1; len(run) > 0; round++ {
		errs := callHandler(ctx, p.spec.Handler, p.cfg.HandlerTimeout, run)
		if !mayAck() {
			return
		}
		cb := p.callbackDeadline(ctx)
		var acks, retry, failed []Message
		var causes []error
		for i, m := range run {
			var err error
			if errs != nil {
				err = errs[i]
			}
			if err == nil {
				acks = append(acks, m)
				continue
			}
			kind := failureKind(err)
			p.hookFailure(kind)
			switch kind {
			case FailureMalformed:
				p.deadLetter(ctx, cb, m, m.Failures+1, "malformed: "+err.Error(), true)
			case FailurePermanent:
				p.deadLetter(ctx, cb, m, m.Failures+1, "permanent: "+err.Error(), true)
			case FailureTransient:
				retry = append(retry, m)
			default:
				failed = append(failed, m)
				causes = append(causes, err)
			}
		}
		p.settleFailed(ctx, cb, failed, causes)
		cb.release()
		p.ack(ctx, acks)
		if len(retry) == 0 {
			return
		}
		// A dependency is down: pause the whole pool, then retry the same
		// entries in memory so the attempt does not count as a delivery.
		d := backoff(round, 100*time.Millisecond, max(p.cfg.ReclaimMinIdle/4, time.Millisecond))
		p.log.Warn("stream handler reported a transient failure; pausing", "entries", len(retry), "pause", d)
		p.pause(d)
		if !p.sleep(c, d, false) || !mayAck() {
			return // stopping: the entries stay pending
		}
		if err := p.touch(ctx, c.name, retry); err != nil {
			p.log.Warn("stream could not keep entries claimed; they stay pending", "err", err)
			return
		}
		run = retry
	}
}

// settleFailed counts one failure for each entry whose handler failed with
// an error of no kind (or panicked), and dead-letters those whose count
// reached MaxDeliveries; the others stay pending, to be retried after
// ReclaimMinIdle. Entries whose failure could not be counted stay pending.
func (p *Pool) settleFailed(ctx context.Context, cb *callbackDeadline, msgs []Message, causes []error) {
	if len(msgs) == 0 {
		return
	}
	counts, err := p.countFailures(ctx, msgs)
	if err != nil {
		p.hookFailure(FailureRedis)
		p.log.Warn("stream could not count handler failures; entries stay pending", "entries", len(msgs), "err", err)
		return
	}
	for i, m := range msgs {
		if counts[i] >= p.cfg.MaxDeliveries {
			p.deadLetter(ctx, cb, m, counts[i], fmt.Sprintf("max deliveries (%d) reached: %v", p.cfg.MaxDeliveries, causes[i]), true)
			continue
		}
		p.log.Warn("stream handler failed; entry stays pending", "id", m.ID, "failures", counts[i], "deliveries", m.Deliveries, "err", causes[i])
	}
}

// deadLetterDeleted dead-letters entries that Redis dropped from the PEL
// because they were deleted from the stream while pending.
func (p *Pool) deadLetterDeleted(ctx context.Context, ids []string) {
	counts, err := p.failureCounts(ctx, ids)
	if err != nil {
		p.log.Warn("stream failure counts unavailable", "err", err)
		counts = make([]int64, len(ids))
	}
	cb := p.callbackDeadline(ctx)
	defer cb.release()
	for i, id := range ids {
		p.deadLetter(ctx, cb, Message{ID: id, Failures: counts[i]}, counts[i], reasonDeleted, false)
	}
}

// callbackDeadline bounds the dead-letter callbacks of one step: made on
// first use, they share one deadline of HandlerTimeout. It belongs to the
// goroutine settling that step.
type callbackDeadline struct {
	parent  context.Context
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
}

func (p *Pool) callbackDeadline(parent context.Context) *callbackDeadline {
	return &callbackDeadline{parent: parent, timeout: p.cfg.HandlerTimeout}
}

// context returns the callbacks' context, starting the deadline on the
// first call.
func (d *callbackDeadline) context() context.Context {
	if d.ctx == nil {
		d.ctx, d.cancel = context.WithTimeout(d.parent, d.timeout)
	}
	return d.ctx
}

// release frees the deadline's timer. Safe to call twice.
func (d *callbackDeadline) release() {
	if d.cancel != nil {
		d.cancel()
	}
}

// ack acknowledges handled messages through Spec.Ack or a plain XACK, and
// deletes the failure counts of those that had any.
func (p *Pool) ack(ctx context.Context, msgs []Message) {
	if len(msgs) == 0 {
		return
	}
	var counted []string
	for _, m := range msgs {
		if m.Failures > 0 {
			counted = append(counted, m.ID)
		}
	}
	var err error
	if p.spec.Ack != nil {
		if err = p.spec.Ack(ctx, msgs); err == nil {
			if err := p.forgetFailures(ctx, counted); err != nil {
				p.log.Warn("stream failure counts not deleted; the reclaim pass will", "err", err)
			}
		}
	} else {
		err = p.xack(ctx, msgs, counted)
	}
	if err != nil {
		p.hookFailure(FailureAck)
		p.log.Warn("stream ack failed; entries stay pending", "entries", len(msgs), "err", err)
		return
	}
	if h := p.cfg.Hooks.Ack; h != nil {
		h(p.spec.Stream, len(msgs))
	}
}

// xack acknowledges msgs with a plain XACK and deletes the failure counts of
// counted in the same round trip.
func (p *Pool) xack(ctx context.Context, msgs []Message, counted []string) error {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	cl := p.client
	cmds := rueidis.Commands{cl.B().Xack().Key(p.spec.Stream).Group(p.spec.Group).Id(ids...).Build()}
	if len(counted) > 0 {
		cmds = append(cmds, cl.B().Hdel().Key(p.failuresKey).Field(counted...).Build())
	}
	res := cl.DoMulti(ctx, cmds...)
	if err := res[0].Error(); err != nil {
		return fmt.Errorf("stream: XACK %s: %w", p.spec.Stream, err)
	}
	if len(res) > 1 {
		if err := res[1].Error(); err != nil {
			p.log.Warn("stream failure counts not deleted; the reclaim pass will", "err", err)
		}
	}
	return nil
}

// deadLetter gives up on m: the callback, then the dead-letter stream, the
// XACK and the deletion of its failure count in one round trip. failures is
// the reported DeadLetter.Deliveries. With pending false the entry is no
// longer in the PEL (Redis dropped it), so there is nothing to acknowledge
// and a callback error cannot keep it. The callback runs under cb's
// deadline.
func (p *Pool) deadLetter(ctx context.Context, cb *callbackDeadline, m Message, failures int64, reason string, pending bool) bool {
	d := DeadLetter{Message: m, Deliveries: failures, Reason: reason, At: p.cfg.Clock.Now()}
	if p.spec.OnDeadLetter != nil {
		if err := p.spec.OnDeadLetter(cb.context(), d); errors.Is(err, ErrResolved) {
			p.log.Info("stream entry found done instead of dead-lettered", "id", m.ID, "failures", failures)
			if err := p.forgetFailures(ctx, []string{m.ID}); err != nil {
				p.log.Warn("stream failure count not deleted; the reclaim pass will", "id", m.ID, "err", err)
			}
			return true
		} else if err != nil {
			p.hookFailure(FailureDeadLetter)
			p.log.Warn("stream dead-letter callback failed", "id", m.ID, "err", err)
			if pending {
				return false
			}
		}
	}
	cl := p.client
	fv := cl.B().Xadd().Key(p.spec.DeadLetterStream).Id("*").FieldValue()
	if n := p.cfg.DeadLetterMaxLen; n > 0 {
		fv = cl.B().Xadd().Key(p.spec.DeadLetterStream).Maxlen().Almost().Threshold(strconv.FormatInt(n, 10)).
			Id("*").FieldValue()
	}
	fv = fv.FieldValue(DeadLetterFieldID, m.ID).
		FieldValue(DeadLetterFieldReason, reason).
		FieldValue(DeadLetterFieldDeliveries, strconv.FormatInt(failures, 10)).
		FieldValue(DeadLetterFieldRedisDeliveries, strconv.FormatInt(m.Deliveries, 10)).
		FieldValue(DeadLetterFieldAt, unixMS(d.At))
	keys := make([]string, 0, len(m.Fields))
	for k := range m.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fv = fv.FieldValue(k, m.Fields[k])
	}
	cmds := rueidis.Commands{fv.Build()}
	if pending {
		cmds = append(cmds, cl.B().Xack().Key(p.spec.Stream).Group(p.spec.Group).Id(m.ID).Build())
	}
	cmds = append(cmds, cl.B().Hdel().Key(p.failuresKey).Field(m.ID).Build())
	res := cl.DoMulti(ctx, cmds...)
	for _, r := range res[:len(res)-1] {
		if err := r.Error(); err != nil {
			p.hookFailure(FailureDeadLetter)
			p.log.Warn("stream dead letter failed; entry stays pending", "id", m.ID, "err", err)
			return false
		}
	}
	if err := res[len(res)-1].Error(); err != nil {
		p.log.Warn("stream failure count not deleted; the reclaim pass will", "id", m.ID, "err", err)
	}
	p.log.Warn("stream entry dead-lettered", "id", m.ID, "failures", failures, "deliveries", m.Deliveries, "reason", reason)
	if h := p.cfg.Hooks.DeadLetter; h != nil {
		h(p.spec.Stream, reason)
	}
	return true
}

func (p *Pool) hookFailure(kind string) {
	if h := p.cfg.Hooks.Failure; h != nil {
		h(p.spec.Stream, kind)
	}
}

func (p *Pool) hookConsumers(n int) {
	if h := p.cfg.Hooks.Consumers; h != nil {
		h(p.spec.Stream, n)
	}
}
