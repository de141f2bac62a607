package stream

import (
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// Reading: each consumer goroutine drains its own pending entries, then
// reads new ones with XREADGROUP and hands them to the handler. After a read
// that found nothing it reports to the supervisor and waits for a turn: the
// supervisor decides which consumer polls the empty stream, and when.

// turn is the supervisor's go-ahead to a consumer whose last read found
// nothing.
type turn struct {
	// block is how long the read may block (XREADGROUP BLOCK); positive only
	// when the supervisor took one of the blocking slots for it, which the
	// consumer gives back after the read.
	block time.Duration
	// poll marks the poller's turn (as against a parked consumer woken
	// because work was found).
	poll bool
}

// consume is one consumer's loop: drain its own pending entries, then read
// new ones until the consumer or the pool stops.
func (p *Pool) consume(c *consumer) {
	defer p.exit(c)
	if !p.drainOwn(c) {
		return
	}
	var t turn       // the current turn; the zero turn reads at once
	waiting := false // the last read found nothing: read again on a turn only
	failures := 0    // failed reads in a row
	for {
		if p.quitting(c) || !p.waitPause(c) {
			return
		}
		p.maybeReclaim(c)
		if waiting {
			var ok bool
			if t, ok = p.awaitTurn(c); !ok {
				return
			}
		}
		left, ok := p.holdLease(c, false)
		if !ok || p.quitting(c) {
			p.giveBackSlot(t)
			return
		}
		// A blocking read must not deliver entries after the lease may have
		// run out.
		entries, err := p.readNew(c, min(t.block, left.Truncate(time.Millisecond)))
		p.giveBackSlot(t)
		t = turn{}
		if err != nil {
			if p.quitting(c) {
				return
			}
			failures++
			p.readFailed(c, err)
			if !p.sleep(c, backoff(failures, p.cfg.PollInterval, 5*time.Second)) {
				return
			}
			if waiting {
				// The poller's read failed: the supervisor says when to
				// poll again.
				p.report(c, report{kind: reportRetry})
			}
			continue
		}
		failures = 0
		p.hookRead(len(entries))
		full := len(entries) >= p.cfg.BatchSize
		if !full && len(entries) > 0 && p.cfg.BatchWait > 0 {
			entries = p.fillBatch(c, entries)
		}
		p.report(c, report{kind: reportRead, n: len(entries), full: full})
		waiting = len(entries) == 0
		if !waiting {
			p.handle(c, toMessages(entries, 1))
		}
	}
}

// fillBatch tops up the partial batch first (a read that returned just
// now): it waits BatchWait, then reads without blocking for up to the rest
// of a batch, and returns the entries of both reads. Its report to the
// supervisor waits for it, so c keeps the poller role meanwhile and no
// parked consumer is woken to take the entries that arrive during the
// wait. A stop of the pool or of c ends the wait at once and skips the
// second read, and so does a lease that could not be held or a read that
// failed: first goes to the handler alone, as a read that returned just
// before the stop would.
func (p *Pool) fillBatch(c *consumer, first []rueidis.XRangeEntry) []rueidis.XRangeEntry {
	if !p.sleep(c, p.cfg.BatchWait) {
		return first
	}
	if _, ok := p.holdLease(c, false); !ok || p.quitting(c) {
		return first
	}
	more, err := p.read(c, ">", 0, p.cfg.BatchSize-len(first))
	if err != nil {
		if !p.quitting(c) {
			p.readFailed(c, err)
		}
		return first
	}
	p.hookRead(len(more))
	return append(first, more...)
}

// hookRead reports a read of new entries that returned n of them.
func (p *Pool) hookRead(n int) {
	if h := p.cfg.Hooks.Read; h != nil {
		h(p.spec.Stream, n)
	}
}

// awaitTurn waits for the supervisor's go-ahead; false if c must stop.
func (p *Pool) awaitTurn(c *consumer) (turn, bool) {
	select {
	case t := <-c.turn:
		return t, true
	case <-p.halt:
		return turn{}, false
	case <-p.readCtx.Done():
		return turn{}, false
	case <-c.quit:
		return turn{}, false
	}
}

// readFailed logs a failed read, and creates the group again if it is gone.
func (p *Pool) readFailed(c *consumer, err error) {
	p.hookFailure(FailureRedis)
	p.log.Warn("stream read failed", "consumer", c.name, "err", err)
	if isNoGroup(err) {
		if err := CreateGroup(p.readCtx, p.client, p.spec.Stream, p.spec.Group); err != nil {
			p.log.Warn("stream group re-creation failed", "err", err)
		}
	}
}

// quitting reports whether consumer c must return: the supervisor halted
// the pool, Stop began (it cancels readCtx before the supervisor sees it), or
// c alone was told to quit.
func (p *Pool) quitting(c *consumer) bool {
	select {
	case <-c.quit:
		return true
	default:
		return p.halted()
	}
}

// sleep waits d; false if c must stop meanwhile.
func (p *Pool) sleep(c *consumer, d time.Duration) bool {
	if d <= 0 {
		return !p.quitting(c)
	}
	select {
	case <-p.cfg.Clock.After(d):
		return true
	case <-p.halt:
		return false
	case <-p.readCtx.Done():
		return false
	case <-c.quit:
		return false
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

// giveBackSlot gives back the blocking-read slot taken for t, if any.
func (p *Pool) giveBackSlot(t turn) {
	if t.block > 0 {
		<-p.blocking
	}
}

// readNew reads entries never delivered (">"), blocking up to block if
// positive.
func (p *Pool) readNew(c *consumer, block time.Duration) ([]rueidis.XRangeEntry, error) {
	return p.read(c, ">", block, p.cfg.BatchSize)
}

// read reads up to want entries after id, blocking up to block if
// positive: one XREADGROUP of up to callSlice entries, then, while each
// came back full and the batch is not, more without blocking (after the
// last entry read, for an id other than ">"). A later read that fails ends
// the batch with the entries read so far; they are delivered, so they go to
// the handler.
func (p *Pool) read(c *consumer, id string, block time.Duration, want int) ([]rueidis.XRangeEntry, error) {
	var out []rueidis.XRangeEntry
	for n := readCount(want, 0); n > 0; n = readCount(want, len(out)) {
		es, err := p.readOnce(c, id, block, n)
		if err != nil {
			if len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
		out = append(out, es...)
		if len(es) < n {
			break
		}
		block = 0
		if id != ">" {
			id = es[len(es)-1].ID
		}
	}
	return out, nil
}

// readOnce is one XREADGROUP of up to count entries after id, blocking up
// to block if positive.
func (p *Pool) readOnce(c *consumer, id string, block time.Duration, count int) ([]rueidis.XRangeEntry, error) {
	cl := p.client
	var cmd rueidis.Completed
	if block > 0 {
		cmd = cl.B().Xreadgroup().Group(p.spec.Group, c.name).Count(int64(count)).
			Block(block.Milliseconds()).Streams().Key(p.spec.Stream).Id(id).Build()
	} else {
		cmd = cl.B().Xreadgroup().Group(p.spec.Group, c.name).Count(int64(count)).
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
	for !p.quitting(c) {
		if _, ok := p.holdLease(c, false); !ok {
			return false
		}
		entries, err := p.read(c, cursor, 0, p.cfg.BatchSize)
		if err != nil {
			if p.quitting(c) {
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
		p.report(c, report{kind: reportSeen})
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
	return p.sleep(c, time.Duration(until-p.cfg.Clock.Now().UnixNano()))
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
