package claim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dibsio/dibs/internal/startstop"
)

// Defaults of BatcherConfig.
const (
	// DefaultBatchInFlight is how many batch calls of one promotion may be
	// in flight at once.
	DefaultBatchInFlight = 2
	// DefaultBatchQueue is how many claims of one promotion may wait for a
	// call.
	DefaultBatchQueue = 1024
	// DefaultBatchCallTimeout bounds a batch call whose claims' contexts
	// carry no deadline.
	DefaultBatchCallTimeout = 5 * time.Second
)

// handoff is the capacity of the channel that hands claims to the
// Batcher's loop, for all promotions together.
const handoff = 1024

// ErrBatcherStopped answers the claims that were waiting in a Batcher's
// queue, not yet sent, when it was stopped: nothing was taken.
var ErrBatcherStopped = errors.New("claim: batcher stopped before the claim was sent")

// errQueueFull answers a claim that found its promotion's queue full: the
// Batcher runs it alone.
var errQueueFull = errors.New("claim: batch queue full")

// BatcherConfig configures a Batcher.
type BatcherConfig struct {
	// MaxBatch is the most claims of one call. 1..MaxBatch; defaults to
	// MaxBatch.
	MaxBatch int
	// InFlight is the most calls of one promotion in flight at once.
	// Defaults to DefaultBatchInFlight.
	InFlight int
	// Queue is the most claims of one promotion waiting for a call; a claim
	// that finds its promotion's queue full runs alone
	// (Gate.ClaimFenced). Defaults to DefaultBatchQueue.
	Queue int
	// CallTimeout is the deadline of a call whose claims' contexts carry
	// none (a call's deadline is the latest of its claims'). Defaults to
	// DefaultBatchCallTimeout.
	CallTimeout time.Duration
}

// withDefaults fills in the zero values.
func (c BatcherConfig) withDefaults() BatcherConfig {
	if c.MaxBatch == 0 {
		c.MaxBatch = MaxBatch
	}
	if c.InFlight == 0 {
		c.InFlight = DefaultBatchInFlight
	}
	if c.Queue == 0 {
		c.Queue = DefaultBatchQueue
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultBatchCallTimeout
	}
	return c
}

// validate names the first field that cannot work.
func (c BatcherConfig) validate() error {
	switch {
	case c.MaxBatch < 1 || c.MaxBatch > MaxBatch:
		return fmt.Errorf("claim: BatcherConfig.MaxBatch must be 1..%d, got %d", MaxBatch, c.MaxBatch)
	case c.InFlight < 1:
		return fmt.Errorf("claim: BatcherConfig.InFlight must be at least 1, got %d", c.InFlight)
	case c.Queue < 1:
		return fmt.Errorf("claim: BatcherConfig.Queue must be at least 1, got %d", c.Queue)
	case c.CallTimeout < 0:
		return fmt.Errorf("claim: BatcherConfig.CallTimeout must not be negative, got %s", c.CallTimeout)
	}
	return nil
}

// Batcher admits first-come claims in batches: the claims of one promotion
// that arrive while its calls are in flight are sent together, in one call
// of the batch claim script (Gate.ClaimBatch), when one of those returns.
// A claim that finds fewer than InFlight calls of its promotion in flight
// is sent at once, alone or with the claims queued beside it: a Batcher
// never waits on a timer, so a claim at low load costs what ClaimFenced
// costs, and under load Redis runs one call per batch instead of one per
// claim.
//
// One goroutine, its loop, owns the queues of every promotion: it starts
// with the first claim and runs until Stop. Each call runs on the
// goroutine of its batch's first claim, which the loop tells to make it
// (so a claim at low load costs two hand-overs between goroutines and no
// new goroutine), at most InFlight per promotion. A promotion's queue
// holds at most Queue claims; a claim that finds it full, and every claim
// after Stop, runs alone, as ClaimFenced.
type Batcher struct {
	gate *Gate
	cfg  BatcherConfig

	// in hands claims to the loop; bounded, senders never block (a claim
	// that finds it full runs alone).
	in chan *waiter
	// done carries the lanes of the calls that returned to the loop.
	done chan *lane

	life     startstop.Base
	started  atomic.Bool     // set once the loop was started (or stopped before)
	stopping <-chan struct{} // life.Stopping(), read once
	stopped  <-chan struct{} // life.Done(), read once

	// Counters and gauges, written by the loop, the calls and the claims
	// run alone, read by Stats.
	calls, batched, alone, queuedNow, inFlightNow atomic.Int64

	// waiters holds waiters for claims to come, with their reply
	// channels: a claim's goroutine puts its waiter back once it received
	// its last reply, when neither the loop nor a call holds it (release).
	waiters sync.Pool
}

// NewBatcher returns a Batcher of claims on gate; an error names the
// BatcherConfig field that cannot work. It starts its loop with the first
// claim; Stop it when done.
func NewBatcher(gate *Gate, cfg BatcherConfig) (*Batcher, error) {
	if gate == nil {
		return nil, errors.New("claim: NewBatcher needs a gate")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Batcher{gate: gate, cfg: cfg, in: make(chan *waiter, handoff), done: make(chan *lane, handoff)}
	b.stopping, b.stopped = b.life.Stopping(), b.life.Done()
	return b, nil
}

// BatcherStats counts what a Batcher did.
type BatcherStats struct {
	// Calls is the batch calls made.
	Calls int64
	// Batched is the claims sent in them.
	Batched int64
	// Alone is the claims run alone: their promotion's queue was full, or
	// the Batcher was stopped.
	Alone int64
	// Queued is the claims waiting in the queues now.
	Queued int64
	// InFlight is the calls in flight now.
	InFlight int64
}

// Stats returns what the Batcher did so far.
func (b *Batcher) Stats() BatcherStats {
	return BatcherStats{Calls: b.calls.Load(), Batched: b.batched.Load(), Alone: b.alone.Load(),
		Queued: b.queuedNow.Load(), InFlight: b.inFlightNow.Load()}
}

// Stop stops the loop: the claims queued and not yet sent are answered
// ErrBatcherStopped, and Stop waits for the calls in flight to be answered
// or for ctx to end (then it returns ctx.Err()). Claims after Stop run
// alone. Safe to call twice, or before the first claim.
func (b *Batcher) Stop(ctx context.Context) error {
	b.started.Store(true)
	return b.life.Stop(ctx)
}

// The states of a waiter: the loop takes a queued claim into a call
// (sent), or its caller gives up on it first (abandoned); never both.
const (
	queued int32 = iota
	sent
	abandoned
)

// waiter is one claim handed to the loop.
type waiter struct {
	ctx   context.Context
	id    string
	ask   Ask
	state atomic.Int32
	reply chan reply // buffered: nobody ever blocks replying
}

// reply is what a waiter is told: its answer, or, for the first claim of
// a batch, to make the batch's call (lead) on the claim's goroutine,
// which answers every claim of the batch, its own included.
type reply struct {
	Answer
	lead []*waiter
	lane *lane
}

// Claim admits one claim of userID in promotion id, as ClaimFenced does,
// in a batch with the claims of the promotion queued beside it. If ctx
// ends while the claim waits in the queue, it is answered ctx's error and
// never sent; once sent, its answer is the one Redis gives, whenever ctx
// ends.
func (b *Batcher) Claim(ctx context.Context, id, userID, idemKey string, fence int64) (Result, error) {
	if !b.started.Load() {
		// A second Start (a claim racing this one) fails harmlessly, and
		// one after Stop leaves the loop stopped: claims then run alone.
		_ = b.life.Start(b.loop)
		b.started.Store(true)
	}
	w := b.waiter()
	w.ctx, w.id, w.ask = ctx, id, Ask{UserID: userID, IdemKey: idemKey, Fence: fence}
	res, held, err := b.await(ctx, w)
	if !held {
		b.release(w)
	}
	return res, err
}

// await hands w to the loop and waits for its claim's answer; held says
// that the loop may still hold w (its claim was abandoned while queued, or
// the loop stopped before it took it), so it must not be reused.
func (b *Batcher) await(ctx context.Context, w *waiter) (res Result, held bool, err error) {
	select {
	case <-b.stopping:
		res, err = b.runAlone(ctx, w)
		return res, false, err
	default:
	}
	select {
	case b.in <- w:
	default:
		res, err = b.runAlone(ctx, w)
		return res, false, err
	}
	select {
	case r := <-w.reply:
		res, err = b.answered(ctx, w, r)
		return res, false, err
	case <-ctx.Done():
		if w.state.CompareAndSwap(queued, abandoned) {
			return Result{}, true, fmt.Errorf("claim %s for %s: %w", w.id, w.ask.UserID, ctx.Err())
		}
		res, err = b.answered(ctx, w, <-w.reply)
		return res, false, err
	case <-b.stopped:
		// Every claim the loop sent or answered was answered before it
		// returned; one it never took was never sent, and may still be in
		// the hand-off channel.
		select {
		case r := <-w.reply:
			res, err = b.answered(ctx, w, r)
			return res, false, err
		default:
			res, err = b.runAlone(ctx, w)
			return res, true, err
		}
	}
}

// waiter returns a waiter in state queued with an empty reply channel.
func (b *Batcher) waiter() *waiter {
	if w, ok := b.waiters.Get().(*waiter); ok {
		return w
	}
	return &waiter{reply: make(chan reply, 1)}
}

// release puts w back for a claim to come. Only for a waiter whose claim
// received its last reply, or was never handed to the loop: nobody else
// holds it, and its reply channel is empty.
func (b *Batcher) release(w *waiter) {
	w.ctx, w.id, w.ask = nil, "", Ask{}
	w.state.Store(queued)
	b.waiters.Put(w)
}

// answered returns the answer a claim got from the loop or its batch's
// call; told to lead its batch, it makes the call first.
func (b *Batcher) answered(ctx context.Context, w *waiter, r reply) (Result, error) {
	if r.lead != nil {
		b.call(r.lane, r.lead)
		r = <-w.reply
	}
	if r.Err == errQueueFull {
		return b.runAlone(ctx, w)
	}
	return r.Result, r.Err
}

// runAlone runs a claim that was not sent in a batch alone.
func (b *Batcher) runAlone(ctx context.Context, w *waiter) (Result, error) {
	b.alone.Add(1)
	return b.gate.ClaimFenced(ctx, w.id, w.ask.UserID, w.ask.IdemKey, w.ask.Fence)
}

// lane is one promotion's queue and calls, owned by the loop: it exists
// while the promotion has claims queued or calls in flight.
type lane struct {
	id       string    // the promotion; read by its calls too, never written
	queue    []*waiter // queued claims, oldest first, at most cfg.Queue
	inFlight int       // calls in flight
}

// loop owns the lanes: it queues the claims handed over, starts a call
// wherever a lane has claims queued and fewer than InFlight calls in
// flight, and forgets a lane once it has neither.
func (b *Batcher) loop(stopping <-chan struct{}) {
	lanes := map[string]*lane{}
	calls := 0 // in flight, all lanes together
	var touched []*lane
	for {
		select {
		case w := <-b.in:
			touched = b.enqueue(lanes, w, touched[:0])
		case l := <-b.done:
			l.inFlight--
			calls--
			touched = append(touched[:0], l)
		case <-stopping:
			b.shutdown(lanes, calls)
			return
		}
		// The claims that arrived meanwhile join the calls about to start.
		for more := true; more; {
			select {
			case w := <-b.in:
				touched = b.enqueue(lanes, w, touched)
			default:
				more = false
			}
		}
		for _, l := range touched {
			calls += b.dispatch(l)
			if l.inFlight == 0 && len(l.queue) == 0 {
				delete(lanes, l.id)
			}
		}
		clear(touched)
	}
}

// enqueue queues w in its promotion's lane, or answers it errQueueFull,
// and appends the lane to touched.
func (b *Batcher) enqueue(lanes map[string]*lane, w *waiter, touched []*lane) []*lane {
	l := lanes[w.id]
	if l == nil {
		l = &lane{id: w.id}
		lanes[w.id] = l
	}
	if len(l.queue) >= b.cfg.Queue {
		w.reply <- reply{Answer: Answer{Err: errQueueFull}}
	} else {
		l.queue = append(l.queue, w)
		b.queuedNow.Add(1)
	}
	return append(touched, l)
}

// dispatch starts calls of l's queued claims while it has fewer than
// InFlight in flight, and returns how many it started: the first claim of
// each batch is told to make the call. A queued claim
// whose caller gave up is dropped, and one whose context ended is answered
// its error: neither is sent.
func (b *Batcher) dispatch(l *lane) int {
	started := 0
	for l.inFlight < b.cfg.InFlight && len(l.queue) > 0 {
		batch := make([]*waiter, 0, min(len(l.queue), b.cfg.MaxBatch))
		k := 0
		for ; k < len(l.queue) && len(batch) < b.cfg.MaxBatch; k++ {
			w := l.queue[k]
			if err := w.ctx.Err(); err != nil && w.state.CompareAndSwap(queued, abandoned) {
				w.reply <- reply{Answer: Answer{Err: fmt.Errorf("claim %s for %s: %w", w.id, w.ask.UserID, err)}}
			} else if w.state.CompareAndSwap(queued, sent) {
				batch = append(batch, w)
			}
		}
		n := copy(l.queue, l.queue[k:])
		clear(l.queue[n:])
		l.queue = l.queue[:n]
		b.queuedNow.Add(-int64(k))
		if len(batch) == 0 {
			continue
		}
		l.inFlight++
		started++
		b.inFlightNow.Add(1)
		batch[0].reply <- reply{lead: batch, lane: l}
	}
	return started
}

// call runs one batch call of l's promotion, on the goroutine of its first
// claim, answers its claims (the first's included) and hands l back to the
// loop.
func (b *Batcher) call(l *lane, batch []*waiter) {
	asks := make([]Ask, len(batch))
	var deadline time.Time
	for i, w := range batch {
		asks[i] = w.ask
		d, ok := w.ctx.Deadline()
		if !ok {
			d = time.Now().Add(b.cfg.CallTimeout)
		}
		if d.After(deadline) {
			deadline = d
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	var answers []Answer
	var err error
	if len(asks) == 1 {
		// One claim runs the claim script itself, which costs Redis a
		// little less than a batch of one.
		a := asks[0]
		answers = make([]Answer, 1)
		answers[0].Result, answers[0].Err = b.gate.ClaimFenced(ctx, l.id, a.UserID, a.IdemKey, a.Fence)
	} else {
		answers, err = b.gate.ClaimBatch(ctx, l.id, asks)
	}
	cancel()
	b.calls.Add(1)
	b.batched.Add(int64(len(batch)))
	b.inFlightNow.Add(-1)
	for i, w := range batch {
		if err != nil {
			w.reply <- reply{Answer: Answer{Err: fmt.Errorf("claim %s for %s: %w", l.id, w.ask.UserID, err)}}
		} else {
			w.reply <- reply{Answer: answers[i]}
		}
	}
	b.done <- l
}

// shutdown answers every claim queued and not yet sent ErrBatcherStopped
// and waits for the calls in flight, which answer theirs.
func (b *Batcher) shutdown(lanes map[string]*lane, calls int) {
	for _, l := range lanes {
		for _, w := range l.queue {
			w.reply <- reply{Answer: Answer{Err: ErrBatcherStopped}}
		}
		b.queuedNow.Add(-int64(len(l.queue)))
	}
	for more := true; more; {
		select {
		case w := <-b.in:
			w.reply <- reply{Answer: Answer{Err: ErrBatcherStopped}}
		default:
			more = false
		}
	}
	for ; calls > 0; calls-- {
		<-b.done
	}
}
