package httpapi

import (
	"sync"
	"time"
)

// keepAlive is the comment line a stream writes on each beat.
var keepAlive = []byte(": keep-alive\n\n")

// beat is the keep-alive clock shared by every event stream of a server:
// one timer, running while a stream is open, closes the channel of the
// current beat every period and opens the next, so an idle stream costs
// no timer of its own and wakes once a period.
type beat struct {
	every time.Duration

	mu      sync.Mutex
	c       chan struct{} // closed at the next beat
	streams int           // open streams
	t       *time.Timer   // nil while no stream is open
}

// join counts a stream in, starting the clock if it stopped.
func (b *beat) join() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.streams++
	if b.t == nil {
		b.c = make(chan struct{})
		b.t = time.AfterFunc(b.every, b.fire)
	}
}

// leave counts a stream out; the clock stops at the next beat once none is
// left.
func (b *beat) leave() {
	b.mu.Lock()
	b.streams--
	b.mu.Unlock()
}

// next is the channel closed at the next beat.
func (b *beat) next() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.c
}

func (b *beat) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.c)
	b.c = make(chan struct{})
	if b.streams > 0 {
		b.t.Reset(b.every)
	} else {
		b.t = nil
	}
}
