package stream

import (
	"context"
	"slices"
	"sync"
	"time"
)

// The supervisor is the one goroutine of a pool that owns its consumer set,
// its scale state, the poller role and the idle decision. Consumers report
// their reads and their exits over one bounded channel (Pool.events); the
// supervisor answers a consumer whose read found nothing with a turn on the
// consumer's own channel. Nothing else writes the state below.

// reportKind says what a consumer reports.
type reportKind int

const (
	// reportRead: a read of new entries returned n entries (full: a whole
	// batch).
	reportRead reportKind = iota
	// reportSeen: the consumer got entries some other way (its own pending
	// list, a reclaim): the pool is not idle.
	reportSeen
	// reportRetry: the poller's read failed; it waits for another turn.
	reportRetry
	// reportExit: the consumer returned; it waits for c.removed.
	reportExit
)

// report is one message from a consumer to the supervisor.
type report struct {
	c    *consumer
	kind reportKind
	n    int
	full bool
}

// report sends r from c to the supervisor. The supervisor reads reports
// until every consumer has exited, so this never blocks for good.
func (p *Pool) report(c *consumer, r report) {
	r.c = c
	p.events <- r
}

// exit reports c's end to the supervisor and, once it is out of the
// heartbeat's list, removes the consumer from the group if it holds nothing
// and gives its lease back.
func (p *Pool) exit(c *consumer) {
	p.report(c, report{kind: reportExit})
	<-c.removed
	select {
	case t := <-c.turn: // a turn sent before the exit was seen
		p.giveBackSlot(t)
	default:
	}
	if c.hasLost() {
		return // the name is another process's now, and so are its entries
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := delConsumerScript.Exec(ctx, p.client, []string{p.spec.Stream},
		[]string{p.spec.Group, c.name}).Error(); err != nil {
		p.log.Warn("stream consumer removal failed", "consumer", c.name, "err", err)
	}
	p.releaseLease(c)
}

// roster decides, from the consumers' reports alone, which consumer polls an
// empty stream and which ones wait: an empty pool reads at most once per poll
// interval whatever its consumer count. It is the supervisor's, and does no
// I/O. Consumers are named by index.
type roster struct {
	poller int   // index of the consumer polling an empty stream; -1: none
	parked []int // consumers waiting for work, oldest first
	// baton is set when a partial read handed polling on while nobody was
	// parked: the next consumer to find the stream empty reads once more at
	// once instead of parking. A stale baton costs one extra read, never a
	// missed one.
	baton bool
}

func newRoster() roster { return roster{poller: -1} }

// emptyAction is what a consumer whose read found nothing does next.
type emptyAction int

const (
	actPoll emptyAction = iota // it is the poller: read again after the poll delay
	actPark                    // wait until a read finds work
	actRead                    // read again at once (it took the baton)
)

// empty records that consumer i's read found nothing.
func (r *roster) empty(i int) emptyAction {
	if r.poller < 0 || r.poller == i {
		r.poller = i
		return actPoll
	}
	if r.baton {
		r.baton = false
		return actRead
	}
	r.parked = append(r.parked, i)
	return actPark
}

// work records that consumer i's read found entries and returns the parked
// consumers to wake. The poller hands its role on: a parked consumer keeps
// reading while i handles the batch. A full batch means a backlog, which
// wants every consumer; a partial one needs a single successor, and waking
// all of them would cost one read per consumer for every entry of a trickle.
func (r *roster) work(i int, full bool) []int {
	released := r.poller == i
	if released {
		r.poller = -1
	}
	switch {
	case full:
		woken := r.parked
		r.parked = nil
		return woken
	case released && len(r.parked) > 0:
		woken := r.parked[:1:1]
		r.parked = r.parked[1:]
		return woken
	case released:
		r.baton = true
	}
	return nil
}

// exit records that consumer i is gone and returns the parked consumers to
// wake: all of them, so one takes over polling even if i had just handed
// the role on after a read that found work.
func (r *roster) exit(i int) []int {
	if r.poller == i {
		r.poller = -1
	}
	woken := slices.DeleteFunc(r.parked, func(j int) bool { return j == i })
	r.parked = nil
	return woken
}

// supervisor is the state of a pool's supervisor goroutine; every field is
// written and read by that goroutine only.
type supervisor struct {
	p         *Pool
	policy    ScalePolicy
	consumers map[int]*consumer // running consumers by index
	roster    roster
	scale     ScaleState

	lastMsg       time.Time // the last time a consumer reported entries
	lastIdleCheck time.Time // the last time the idle check asked Redis

	// poll fires the poller's next turn; nil when none is pending. pollFor
	// is the consumer it is for.
	poll    <-chan time.Time
	pollFor *consumer

	halting bool           // the pool is stopping: consumers are told to return
	wg      sync.WaitGroup // consumer goroutines
}

func newSupervisor(p *Pool) *supervisor {
	cfg := p.cfg
	return &supervisor{
		p: p, consumers: make(map[int]*consumer), roster: newRoster(),
		policy: ScalePolicy{
			Min: cfg.MinConsumers, Max: cfg.MaxConsumers,
			ActiveTrigger: cfg.ConsecutiveActiveTrigger, IdleTrigger: cfg.ConsecutiveIdleTrigger,
			StartMinInterval: cfg.StartConsumerMinInterval, StopMinInterval: cfg.StopConsumerMinInterval,
		},
	}
}

// publish makes the consumer set visible to the heartbeat and Consumers.
func (s *supervisor) publish() {
	cs := make([]*consumer, 0, len(s.consumers))
	for _, c := range s.consumers {
		cs = append(cs, c)
	}
	s.p.live.Store(&cs)
	s.p.hookConsumers(len(cs))
}

// setup leases the initial consumers (the group exists). On failure it gives
// back the names taken so far: no consumer will run under them, and a
// restart should find them free at once.
func (s *supervisor) setup(ctx context.Context) error {
	p := s.p
	want := InitialConsumers(p.spec.ExpectedTotal, p.cfg.MinConsumers, p.cfg.MaxConsumers)
	if p.spec.Size != nil {
		if n := p.spec.Size(); n > 0 {
			want = min(max(n, p.cfg.MinConsumers), p.cfg.MaxConsumers)
		}
	}
	for range want {
		c, err := p.leaseNext(ctx, s.consumers)
		if err != nil {
			for idx, c := range s.consumers {
				delete(s.consumers, idx)
				p.releaseLease(c)
			}
			return err
		}
		if c == nil {
			break
		}
		s.consumers[c.idx] = c
	}
	if len(s.consumers) == 0 {
		return errNoLease(p)
	}
	s.publish() // before Start returns: Consumers counts them
	return nil
}

// run starts the consumers and the heartbeat, then applies the consumers'
// reports until the pool stops; it returns once every consumer and the
// heartbeat have returned.
func (s *supervisor) run(stopping <-chan struct{}) {
	p := s.p
	now := p.cfg.Clock.Now()
	s.lastMsg = now
	p.nextReclaim.Store(now.UnixNano())
	s.scale.Consumers = len(s.consumers)
	for _, c := range s.consumers {
		s.launch(c)
	}
	// The heartbeat outlives the stop signal: consumers finishing their
	// handlers still need a live lease to acknowledge.
	var hb sync.WaitGroup
	hbStop := make(chan struct{})
	hb.Go(func() { p.heartbeat(hbStop) })
	s.loop(stopping)
	s.wg.Wait()
	close(hbStop)
	hb.Wait()
}

func (s *supervisor) launch(c *consumer) {
	s.wg.Go(func() { s.p.consume(c) })
}

// loop applies reports until the pool has stopped and its last consumer
// exited.
func (s *supervisor) loop(stopping <-chan struct{}) {
	p := s.p
	for len(s.consumers) > 0 {
		var wakeups <-chan struct{}
		if s.poll != nil {
			wakeups = p.wakeups // a Wake cuts the poller's sleep short
		}
		select {
		case r := <-p.events:
			s.apply(r)
		case <-s.poll:
			s.pollNow()
		case <-wakeups:
			s.pollNow()
		case <-stopping:
			stopping = nil
			s.halt()
		}
	}
}

// apply applies one report.
func (s *supervisor) apply(r report) {
	c := r.c
	if r.kind == reportExit {
		s.exited(c)
		return
	}
	if s.halting {
		return
	}
	switch r.kind {
	case reportSeen:
		s.lastMsg = s.p.cfg.Clock.Now()
	case reportRetry:
		s.onEmpty(c)
	case reportRead:
		if r.n > 0 {
			s.lastMsg = s.p.cfg.Clock.Now()
			c.empty = 0
			for _, i := range s.roster.work(c.idx, r.full) {
				s.give(s.consumers[i], turn{})
			}
		} else {
			c.empty++
			s.onEmpty(c)
		}
		s.applyScale(r.full)
	}
}

// onEmpty decides what c does after a read that found nothing.
func (s *supervisor) onEmpty(c *consumer) {
	switch s.roster.empty(c.idx) {
	case actPark:
	case actRead:
		s.give(c, turn{})
	case actPoll:
		if s.idleCheck() {
			s.halt()
			return
		}
		p := s.p
		if p.cfg.ReadMode == ReadBlock && p.takeBlockingSlot() {
			s.give(c, turn{block: p.cfg.Block, poll: true})
			return
		}
		s.poll = p.cfg.Clock.After(pollDelay(c.empty, p.cfg.PollInterval))
		s.pollFor = c
	}
}

// pollNow gives the poller its turn.
func (s *supervisor) pollNow() {
	c := s.pollFor
	s.poll, s.pollFor = nil, nil
	s.give(c, turn{poll: true})
}

// give hands c a turn. A woken parked consumer starts counting empty reads
// afresh. It never blocks: a consumer waits for one turn at a time.
func (s *supervisor) give(c *consumer, t turn) {
	if !t.poll {
		c.empty = 0
	}
	c.turn <- t
}

// exited drops c from the set, lets it give its lease back, and stops the
// pool when no consumer is left.
func (s *supervisor) exited(c *consumer) {
	delete(s.consumers, c.idx)
	if s.pollFor == c {
		s.poll, s.pollFor = nil, nil
	}
	s.publish()
	close(c.removed)
	for _, i := range s.roster.exit(c.idx) {
		if !s.halting {
			s.give(s.consumers[i], turn{})
		}
	}
	if len(s.consumers) == 0 && !s.halting {
		// Every consumer is gone (leases lost): the pool cannot work.
		s.halt()
	}
}

// halt begins the pool's stop: consumers stop reading, handlers in flight
// finish.
func (s *supervisor) halt() {
	if s.halting {
		return
	}
	s.halting = true
	s.poll, s.pollFor = nil, nil
	s.p.markClosing()
	close(s.p.halt)
	s.p.readCancel()
}

// applyScale feeds one read into the scaling policy and applies its decision.
func (s *supervisor) applyScale(full bool) {
	p := s.p
	if p.cfg.MinConsumers == p.cfg.MaxConsumers {
		return
	}
	s.scale.Consumers = len(s.consumers)
	var act ScaleAction
	s.scale, act = s.policy.Next(s.scale, full, p.cfg.Clock.Now())
	switch act {
	case ScaleUp:
		s.addConsumer()
	case ScaleDown:
		var victim *consumer
		for _, c := range s.consumers {
			if victim == nil || c.idx > victim.idx {
				victim = c
			}
		}
		if victim != nil {
			p.log.Debug("stream pool scaling down", "consumer", victim.name)
			victim.stop()
		}
	}
}

// addConsumer leases one more consumer name and starts its goroutine.
func (s *supervisor) addConsumer() {
	p := s.p
	if len(s.consumers) >= p.cfg.MaxConsumers {
		return
	}
	c, err := p.leaseNext(p.readCtx, s.consumers)
	if err != nil || c == nil {
		if err != nil && p.readCtx.Err() == nil {
			p.log.Warn("stream pool could not add a consumer", "err", err)
		}
		return
	}
	s.consumers[c.idx] = c
	p.log.Debug("stream pool scaling up", "consumer", c.name)
	s.publish()
	s.launch(c)
}

// idleCheck decides an idle stop: the pool has had no message for
// IdleTimeout and its group has nothing pending and nothing undelivered, and
// no Wake came while Redis was asked.
func (s *supervisor) idleCheck() bool {
	p := s.p
	now := p.cfg.Clock.Now()
	if !idleDue(now, s.lastMsg, s.lastIdleCheck, p.cfg.IdleTimeout) {
		return false
	}
	s.lastIdleCheck = now
	seq := p.wakeSeqNow()
	gi, err := readGroup(p.readCtx, p.client, p.spec.Stream, p.spec.Group)
	if err != nil {
		p.log.Warn("stream idle check failed", "err", err)
		return false
	}
	if h := p.cfg.Hooks.Lag; h != nil {
		h(p.spec.Stream, gi.lag, gi.pending)
	}
	if gi.pending != 0 || gi.lag != 0 || !p.commitIdle(seq) {
		return false
	}
	p.idleStopped.Store(true)
	p.log.Info("stream pool idle and drained; stopping", "idle_timeout", p.cfg.IdleTimeout)
	return true
}
