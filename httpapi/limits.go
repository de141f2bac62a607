package httpapi

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// streamDeadline keeps a streamed request's connection deadlines a window
// ahead of its last line or event. It belongs to the goroutine that serves
// the stream.
type streamDeadline struct {
	rc     *http.ResponseController
	conn   net.Conn // instead of rc: a connection taken over from net/http
	window time.Duration
	next   time.Time // the deadlines are pushed again from this time on
}

// touch pushes the read and write deadlines to now plus the window (the
// write deadline only on a connection taken over, which nothing reads).
// Calls within an eighth of the window of the last push do nothing, so a
// stream of many short lines costs one clock read per line.
func (d *streamDeadline) touch() {
	now := time.Now()
	if now.Before(d.next) {
		return
	}
	d.next = now.Add(d.window / 8)
	if d.conn != nil {
		_ = d.conn.SetWriteDeadline(now.Add(d.window))
		return
	}
	_ = d.rc.SetReadDeadline(now.Add(d.window))
	_ = d.rc.SetWriteDeadline(now.Add(d.window))
}

// streamLimit admits the streamed requests of every endpoint, at most
// Config.MaxStreams at once, and keeps each one's deadlines.
type streamLimit struct {
	streams chan struct{} // one token per running streamed request
	window  time.Duration // Config.StreamIdleTimeout
	m       *Metrics
}

// beginStream admits a streamed request: one of at most Config.MaxStreams,
// shared by every streaming endpoint. It returns the request's deadline
// keeper and the function that gives the slot back; ok false means the
// request was answered with 503 overloaded.
func (s *streamLimit) beginStream(w http.ResponseWriter, r *http.Request) (d *streamDeadline, done func(), ok bool) {
	select {
	case s.streams <- struct{}{}:
	default:
		s.m.Shed.Inc()
		problem(CodeOverloaded, "too many streamed requests in flight; retry shortly").retry(1).write(w, r)
		return nil, nil, false
	}
	d = &streamDeadline{rc: http.NewResponseController(w), window: s.window}
	d.touch()
	return d, func() { <-s.streams }, true
}

// LimitListener returns a listener that holds at most n accepted
// connections open at once. At the cap Accept waits until one of them is
// closed, so further clients wait in the kernel's accept queue (their
// connect completes, no request is read) and are refused by the kernel once
// that queue is full. Closing the listener ends a waiting Accept. n < 1
// means DefaultMaxConns.
func LimitListener(l net.Listener, n int) net.Listener {
	if n < 1 {
		n = DefaultMaxConns
	}
	return &limitListener{Listener: l, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	slots     chan struct{} // one token per open accepted connection
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

// Accept waits for a free slot, then accepts.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close closes the listener and ends a waiting Accept.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.closed) })
	return err
}

// limitConn gives its slot back when first closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
