// Package startstop is the lifecycle shared by dibs's long-running parts: a
// part that runs one goroutine of its own (a loop that owns its state) holds
// a [Base] and answers Start and Stop through it, so every part gives the
// same answers to the same questions:
//
//   - Start runs the part's loop in a new goroutine and returns at once. A
//     second Start fails with [ErrStarted].
//   - Stop asks the loop to return (closes [Base.Stopping]) and waits until
//     it has, or until ctx is done: then it returns ctx.Err() and the loop
//     goes on returning in the background; [Base.Done] tells when it has.
//   - Stop is safe to call twice and concurrently: every call waits for
//     the same end. (The loop itself never needs Stop: it just returns.)
//   - Stop before Start is a no-op that ends the part: Done is closed at
//     once, and nothing ever runs.
//   - Start after Stop (or after the loop returned by itself) fails with
//     [ErrStopped]: a stopped part is done for good. Make a new one to run
//     again; nothing half-stopped is ever restarted.
//
// A loop may also return by itself (it found it has nothing left to do);
// the part is then stopped as if Stop had been called, and Stopping is
// closed too, so helpers that watch Stopping end as well.
//
// A part embeds or holds a Base and calls Start with its loop:
//
//	type Poller struct{ life startstop.Base }
//
//	func (p *Poller) Start() error { return p.life.Start(p.loop) }
//	func (p *Poller) Stop(ctx context.Context) error { return p.life.Stop(ctx) }
//
//	func (p *Poller) loop(stopping <-chan struct{}) {
//		for {
//			select {
//			case <-stopping:
//				return
//			case <-tick:
//				// ...
//			}
//		}
//	}
//
// A part whose loop works on a context (its requests to Redis or a database
// take one) calls StartContext instead: the loop gets a context that keeps
// the values of Start's ctx but not its cancellation, and is cancelled when
// Stopping closes. So the caller's ctx, often one of a request or of the
// process's start-up, never ends the part; only Stop does:
//
//	func (p *Poller) Start(ctx context.Context) error { return p.life.StartContext(ctx, p.loop) }
//
//	func (p *Poller) loop(ctx context.Context) {
//		for {
//			select {
//			case <-ctx.Done():
//				return
//			case <-tick:
//				p.poll(ctx)
//			}
//		}
//	}
//
// Every goroutine the loop starts must be waited for before the loop
// returns: Done then means that nothing of the part runs any more.
package startstop

import (
	"context"
	"errors"
	"sync"
)

var (
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("startstop: already started")
	// ErrStopped is returned by Start after Stop, or after the loop
	// returned by itself.
	ErrStopped = errors.New("startstop: already stopped")
)

type state int

const (
	stateNew state = iota
	stateRunning
	stateStopped
)

// Base runs one loop goroutine and answers Start and Stop for it. The zero
// value is ready to use; a Base must not be copied after first use.
type Base struct {
	once sync.Once // makes the channels, which never change after
	// started is closed by Start; stopping by the first Stop, or when the
	// loop returned; done when the loop returned, or by Stop before Start.
	started, stopping, done chan struct{}

	mu     sync.Mutex // guards the fields below, and the closing of the channels
	state  state
	cancel context.CancelFunc // cancels StartContext's context; nil for Start
}

// init makes the channels, once. Their readers need no lock.
func (b *Base) init() {
	b.once.Do(func() {
		b.started = make(chan struct{})
		b.stopping = make(chan struct{})
		b.done = make(chan struct{})
	})
}

// closeStopping closes b.stopping once, and cancels StartContext's context.
// The caller holds b.mu.
func (b *Base) closeStopping() {
	if b.cancel != nil {
		b.cancel()
	}
	select {
	case <-b.stopping:
	default:
		close(b.stopping)
	}
}

// Start runs loop in a new goroutine and returns; loop gets the Stopping
// channel and must return soon after it is closed. It fails with ErrStarted
// if the Base was started before, and with ErrStopped if it was stopped
// (by Stop, or by its loop returning).
func (b *Base) Start(loop func(stopping <-chan struct{})) error {
	return b.start(nil, loop)
}

// StartContext runs loop in a new goroutine, as Start does, on a context
// that carries ctx's values but not its cancellation nor its deadline
// (context.WithoutCancel), and that is cancelled once Stopping closes: by
// Stop, or when loop returned. loop must return soon after its context is
// done. It fails as Start does, and then never calls loop.
func (b *Base) StartContext(ctx context.Context, loop func(ctx context.Context)) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	err := b.start(cancel, func(<-chan struct{}) { loop(runCtx) })
	if err != nil {
		cancel()
	}
	return err
}

// start runs loop, with cancel (if not nil) called once Stopping closes.
func (b *Base) start(cancel context.CancelFunc, loop func(stopping <-chan struct{})) error {
	b.init()
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case stateRunning:
		return ErrStarted
	case stateStopped:
		return ErrStopped
	}
	b.state = stateRunning
	b.cancel = cancel
	close(b.started)
	go func() {
		defer func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.state = stateStopped
			b.closeStopping()
			close(b.done)
		}()
		loop(b.stopping)
	}()
	return nil
}

// Stop closes Stopping and waits until the loop has returned, or until ctx
// is done, whichever comes first; it returns ctx.Err() in the second case.
// Before Start it ends the Base at once (Done is closed, a later Start fails
// with ErrStopped) and returns nil. Safe to call twice and concurrently.
func (b *Base) Stop(ctx context.Context) error {
	b.init()
	b.mu.Lock()
	if b.state == stateNew {
		b.state = stateStopped
		b.closeStopping()
		close(b.done)
	} else {
		b.closeStopping()
	}
	b.mu.Unlock()
	select {
	case <-b.done:
		return nil
	default:
	}
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Started returns a channel closed once Start (or StartContext) ran the
// loop; it stays closed after the loop returned. It is never closed when
// Stop came before Start. With Done, it tells whether the loop runs:
// started and not done.
func (b *Base) Started() <-chan struct{} {
	b.init()
	return b.started
}

// Stopping returns a channel closed once Stop was first called, or once the
// loop returned by itself.
func (b *Base) Stopping() <-chan struct{} {
	b.init()
	return b.stopping
}

// Done returns a channel closed once the loop has returned, or at once if
// Stop came before Start.
func (b *Base) Done() <-chan struct{} {
	b.init()
	return b.done
}
