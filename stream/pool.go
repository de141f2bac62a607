package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/dibsio/dibs/internal/startstop"
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
	// fails, and its entry stays pending. A callback is expected to log
	// the dead letter: the pool then logs it at Debug only, so each dead
	// letter is logged once (without a callback the pool logs it at Warn).
	// Optional.
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
	// Size, if set, is asked for the consumer count each time the pool
	// starts, before ExpectedTotal: a positive answer is clamped to
	// MinConsumers..MaxConsumers and used; 0 or less falls back to
	// InitialConsumers(ExpectedTotal). It must not block (the owner keeps
	// the answer ready, an atomic say). Optional.
	Size func() int
	// Logger, if set, receives the pool's logs in place of Config.Logger,
	// so a pool's lines can name what its stream is for (a promotion, say).
	// Either way each line carries stream and group. Optional.
	Logger *slog.Logger
}

func (s Spec) withDefaults() Spec {
	if s.DeadLetterStream == "" {
		s.DeadLetterStream = s.Stream + ":dlq"
	}
	return s
}

// logger is the logger of the pool of s: Spec.Logger, else def.
func (s Spec) logger(def *slog.Logger) *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return def
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
//
// One supervisor goroutine owns the consumer set, the scale state, the
// poller role and the idle decision (see supervisor.go); consumer goroutines
// read, handle and report to it; a heartbeat goroutine renews the leases.
type Pool struct {
	// Set by newPool; read-only afterwards.
	client      rueidis.Client
	instance    string
	spec        Spec
	cfg         Config
	log         *slog.Logger
	token       string        // lease value: identifies this process
	failuresKey string        // FailuresKey of the stream and group
	blocking    chan struct{} // slots for XREADGROUP BLOCK, shared by a registry's pools: taken by the supervisor for a poll turn, given back by the consumer after its read

	// life runs the supervisor: Start, Stop and Done go through it.
	life startstop.Base

	readCtx    context.Context    // cancelled by Stop and by the supervisor's halt: interrupts reads
	readCancel context.CancelFunc // called by Stop and the supervisor
	hardCtx    context.Context    // cancelled once the supervisor returned, or at Stop's deadline: handlers and acks
	hardCancel context.CancelFunc // called by the supervisor's goroutine and by Stop

	// prev is the pool of the same key that was stopping when a registry
	// started this one; this pool starts, and is done, only after it.
	// Written by startAfter and cleared by the supervisor's goroutine once
	// prev is done; read by cancelHandlers.
	prev atomic.Pointer[Pool]

	events  chan report   // consumers → supervisor: reads and exits; bounded, read by the supervisor until the last consumer exited
	wakeups chan struct{} // Wake → supervisor (size 1): cuts the poller's sleep short
	halt    chan struct{} // closed by the supervisor when the pool begins to stop; read by consumers

	wakeMu  sync.Mutex // guards closing and wakeSeq: a Wake and an idle stop never cross
	closing bool       // set by Stop, and by the supervisor when it stops the pool; read by Wake and running
	wakeSeq uint64     // bumped by Wake; the supervisor commits an idle stop only if it is unchanged since its group check

	live        atomic.Pointer[[]*consumer] // the consumer set as the supervisor last published it; read by the heartbeat and Consumers
	idleStopped atomic.Bool                 // written by the supervisor; read by IdleStopped
	nextReclaim atomic.Int64                // unix ns when the next reclaim pass is due: written by the consumer that takes the pass (CAS), read by every consumer
	pausedUntil atomic.Int64                // unix ns until which no consumer reads: written by a consumer that met a transient failure, read by every consumer

	reclaimMu   sync.Mutex // held (TryLock) by the consumer running a reclaim pass: one pass at a time
	reclaimFrom string     // where the reclaim scan goes on ("-" or "(id"); the reclaim pass's, under reclaimMu

	leaseMu sync.Mutex    // serialises the heartbeat's renewal passes with lease releases by exiting consumers
	renewMu sync.Mutex    // guards renewed
	renewed chan struct{} // closed and replaced by the heartbeat after each pass; read by consumers waiting in holdLease
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
		log:         spec.logger(cfg.Logger).With("stream", spec.Stream, "group", spec.Group),
		events:      make(chan report, 2*cfg.MaxConsumers),
		wakeups:     make(chan struct{}, 1),
		halt:        make(chan struct{}),
		renewed:     make(chan struct{}),
	}
	p.live.Store(&[]*consumer{})
	p.readCtx, p.readCancel = context.WithCancel(context.Background())
	p.hardCtx, p.hardCancel = context.WithCancel(context.Background())
	return p, nil
}

func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func errNoLease(p *Pool) error {
	return fmt.Errorf("%w: instance %s on %s", ErrLeaseUnavailable, p.instance, p.spec.Stream)
}

// Start creates the group if needed, leases the initial consumer names and
// starts the consumers. It fails with ErrLeaseUnavailable when every name
// is held by other live processes. A second Start fails, and so does a
// Start after Stop: a stopped pool is done for good. A pool whose Start
// failed is done.
func (p *Pool) Start(ctx context.Context) error {
	ready := make(chan error, 1)
	err := p.life.Start(func(stopping <-chan struct{}) {
		defer p.hardCancel()
		s := newSupervisor(p)
		err := p.setup(ctx, s)
		ready <- err
		if err != nil {
			return
		}
		s.run(stopping)
	})
	if err != nil {
		return fmt.Errorf("stream: start pool of %s: %w", p.spec.Stream, err)
	}
	return <-ready
}

// startAfter starts the pool in the background once prev (a pool of the same
// key that is still stopping) is done, so two pools of one process never use
// the same consumer names at once. A pool stopped before it began is still
// done only after prev: its Done then stands for every earlier pool of the
// key, which is what lets the registry remember only the newest one. Setup
// errors are logged; the pool is then done.
func (p *Pool) startAfter(prev *Pool) {
	p.prev.Store(prev)
	_ = p.life.Start(func(stopping <-chan struct{}) {
		defer p.hardCancel()
		if prev != nil {
			select {
			case <-prev.Done():
			case <-stopping:
				// prev was told to stop before this pool was made, so
				// it ends once its handlers return.
				<-prev.Done()
				p.prev.Store(nil)
				return
			}
			p.prev.Store(nil)
		}
		s := newSupervisor(p)
		if err := p.setup(p.readCtx, s); err != nil {
			if !p.isClosing() {
				p.log.Error("stream pool failed to start", "err", err)
				p.hookFailure(FailureRedis)
			}
			return
		}
		s.run(stopping)
	})
}

// setup creates the group and leases the initial consumers. On failure the
// pool is closing.
func (p *Pool) setup(ctx context.Context, s *supervisor) error {
	err := CreateGroup(ctx, p.client, p.spec.Stream, p.spec.Group)
	if err == nil {
		err = s.setup(ctx)
	}
	if err != nil {
		p.markClosing()
	}
	return err
}

// Stop stops reading, lets handlers in flight finish until ctx is done, and
// leaves whatever is unfinished pending for a later delivery. At ctx's
// deadline the handlers' contexts are cancelled and Stop returns ctx.Err();
// Done tells when the last goroutine has returned. Safe to call twice,
// concurrently, or before Start (a later Start then fails).
func (p *Pool) Stop(ctx context.Context) error {
	p.beginStop()
	if err := p.life.Stop(ctx); err != nil {
		p.cancelHandlers()
		return err
	}
	p.hardCancel()
	return nil
}

// beginStop tells the pool to stop without waiting for it.
func (p *Pool) beginStop() {
	p.markClosing()
	p.readCancel()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_ = p.life.Stop(done) // a done context: ask, do not wait
}

// cancelHandlers cancels the handlers of this pool and of the earlier pools
// of its key it waits for.
func (p *Pool) cancelHandlers() {
	for q := p; q != nil; q = q.prev.Load() {
		q.hardCancel()
	}
}

// Done is closed once the pool has stopped and all its goroutines returned.
func (p *Pool) Done() <-chan struct{} { return p.life.Done() }

// IdleStopped reports whether the pool stopped itself after its idle timeout.
func (p *Pool) IdleStopped() bool { return p.idleStopped.Load() }

// Consumers returns the number of consumers running now.
func (p *Pool) Consumers() int { return len(p.liveConsumers()) }

// liveConsumers returns the consumer set the supervisor last published.
func (p *Pool) liveConsumers() []*consumer { return *p.live.Load() }

// Wake tells the pool that new entries exist: the consumer polling an empty
// stream reads at once instead of finishing its sleep, and an idle stop that
// is being decided is called off. No-op on a pool that is stopping.
func (p *Pool) Wake() { p.wake() }

// wake is Wake, and reports whether the pool was still running: if it
// was, an idle stop being decided now is called off and the pool goes on;
// if not, the caller must start a new pool for new work.
func (p *Pool) wake() bool {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	if p.closing {
		return false
	}
	p.wakeSeq++
	select {
	case p.wakeups <- struct{}{}:
	default:
	}
	return true
}

// wakeSeqNow returns the number of Wakes so far.
func (p *Pool) wakeSeqNow() uint64 {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	return p.wakeSeq
}

// commitIdle decides an idle stop: only if no Wake came since seq was read
// and no stop has begun. Once it returned true, wake reports false.
func (p *Pool) commitIdle(seq uint64) bool {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	if p.wakeSeq != seq || p.closing {
		return false
	}
	p.closing = true
	return true
}

// markClosing records that the pool is stopping.
func (p *Pool) markClosing() {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	p.closing = true
}

// isClosing reports whether the pool is stopping or stopped.
func (p *Pool) isClosing() bool {
	p.wakeMu.Lock()
	defer p.wakeMu.Unlock()
	return p.closing
}

// halted reports whether the pool is stopping: the supervisor halted it, or
// Stop began (it cancels readCtx before the supervisor sees it).
func (p *Pool) halted() bool {
	select {
	case <-p.halt:
		return true
	case <-p.readCtx.Done():
		return true
	default:
		return false
	}
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
