package stream

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// A consumer name is leased by one process at a time (SET NX PX with a
// heartbeat), so two live processes never share a pending-entries list. This
// file holds the lease: taking a name, renewing it, giving it back, and the
// check a consumer makes before every command it sends under its name.

// consumer is one consumer goroutine's identity, its lease, and the channels
// through which the supervisor talks to it.
type consumer struct {
	idx      int
	name     string
	leaseKey string

	quit     chan struct{} // closed (once) to stop this consumer alone: scale-down, lease lost
	quitOnce sync.Once
	lost     chan struct{} // closed (once) by the heartbeat when another process holds the lease
	lostOnce sync.Once

	// turn carries the supervisor's go-ahead to a consumer whose last read
	// found nothing: written by the supervisor, at most one turn at a time
	// (size 1), read by the consumer.
	turn chan turn
	// removed is closed by the supervisor once it has dropped the consumer
	// from its set (after its exit report); read by the exiting consumer
	// before it gives its lease back.
	removed chan struct{}
	// empty is how many reads in a row found nothing; written and read by
	// the supervisor only.
	empty int

	// validUntil is the Clock time (unix ns) until which the lease is surely
	// held: written by leaseNext and the heartbeat, read by the consumer
	// before each command it sends under its name.
	validUntil atomic.Int64
}

func newConsumer(idx int, name, leaseKey string) *consumer {
	return &consumer{
		idx: idx, name: name, leaseKey: leaseKey,
		quit: make(chan struct{}), lost: make(chan struct{}),
		turn: make(chan turn, 1), removed: make(chan struct{}),
	}
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

// leaseNext leases the lowest consumer index not in taken that no other
// process holds; nil when none is free within the scan range. Called by the
// supervisor, which owns taken.
func (p *Pool) leaseNext(ctx context.Context, taken map[int]*consumer) (*consumer, error) {
	limit := 2*p.cfg.MaxConsumers + 8
	for i := 0; i < limit; i++ {
		if _, mine := taken[i]; mine {
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
			c := newConsumer(i, name, key)
			c.validUntil.Store(p.leaseValidUntil(start))
			return c, nil
		}
	}
	return nil, nil
}

// releaseLease gives c's name back. The caller made sure the heartbeat no
// longer lists c.
func (p *Pool) releaseLease(c *consumer) {
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := releaseScript.Exec(ctx, p.client, []string{c.leaseKey}, []string{p.token}).Error(); err != nil {
		p.log.Warn("stream lease release failed", "consumer", c.name, "err", err)
	}
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
		p.renewMu.Lock()
		close(p.renewed)
		p.renewed = make(chan struct{})
		p.renewMu.Unlock()
	}
}

// renewLeases is one heartbeat pass over the consumers the supervisor last
// published.
func (p *Pool) renewLeases(ttl string) {
	// A release must not land between this pass's listing of the consumers
	// and its SET: the script would lease the freed name again. A consumer
	// is unlisted before it releases, so listing under leaseMu is enough.
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	cs := p.liveConsumers()
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
	p.renewMu.Lock()
	defer p.renewMu.Unlock()
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
	var halt, quit <-chan struct{}
	if !ack {
		halt, quit = p.halt, c.quit
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
		if passed && p.halted() {
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
		case <-halt:
			return 0, false
		case <-quit:
			return 0, false
		}
	}
}
