//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ipBindAddressNoPort (IP_BIND_ADDRESS_NO_PORT) leaves the choice of a
// bound socket's port to connect, which may then reuse a port towards
// another destination: the source address's ports go further.
const ipBindAddressNoPort = 24

// streams holds many idle server-sent event streams open from a bounded
// set of goroutines: dialers connect raw sockets (from the addresses
// sourceAddr deals out) and send each stream's request, and a few readers,
// each with its own epoll set, read what the server writes. Each reader
// owns the state and the sockets of the streams dealt to it.
type streams struct {
	server  syscall.SockaddrInet4
	path    func(i int) string // the request path of stream i
	n       int
	readers []*streamReader
	stop    [2]int // a pipe: closing stop[1] wakes every reader to end
	wg      sync.WaitGroup

	ready, hinted, failed, ended atomic.Int64
	lastHint                     atomic.Int64 // UnixNano of the latest first hint
	poke                         chan struct{}
}

// streamReader is one epoll set and the streams in it.
type streamReader struct {
	ep    int
	scans map[int32]*sseScan // by socket
}

// openStreams dials n streams to server, paths from path, with dialers
// dialers and readers readers, and returns once every one was dialed (or
// failed to be). ready and hint are the bytes that mark a stream's first
// standing and the hint.
func openStreams(ctx context.Context, server netip.AddrPort, n, dialers, readers int, path func(int) string, ready, hint []byte) (*streams, error) {
	if !server.Addr().Is4() {
		return nil, fmt.Errorf("the server %v is not IPv4", server)
	}
	s := &streams{server: syscall.SockaddrInet4{Port: int(server.Port()), Addr: server.Addr().As4()},
		path: path, n: n, poke: make(chan struct{}, 1)}
	if err := syscall.Pipe2(s.stop[:], syscall.O_CLOEXEC); err != nil {
		return nil, err
	}
	for range readers {
		ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			s.close()
			return nil, err
		}
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(s.stop[0])}
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, s.stop[0], &ev); err != nil {
			syscall.Close(ep)
			s.close()
			return nil, err
		}
		r := &streamReader{ep: ep, scans: map[int32]*sseScan{}}
		s.readers = append(s.readers, r)
		s.wg.Go(func() { s.read(r, ready, hint) })
	}
	var next atomic.Int64
	var dials sync.WaitGroup
	var firstErr atomic.Pointer[error]
	for range dialers {
		dials.Go(func() {
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				if err := s.dial(i); err != nil {
					s.failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	dials.Wait()
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(os.Stderr, "claimcost: %d streams failed to open, the first: %v\n", s.failed.Load(), *e)
	}
	return s, ctx.Err()
}

// dial connects stream i from its source address, sends its request and
// hands the socket to its reader.
func (s *streams) dial(i int) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	req := "GET " + s.path(i) + " HTTP/1.1\r\nHost: dibs\r\nAccept: text/event-stream\r\n\r\n"
	_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
	err = syscall.Bind(fd, &syscall.SockaddrInet4{Addr: sourceAddr(i)})
	if err == nil {
		err = syscall.Connect(fd, &s.server)
	}
	for b := []byte(req); err == nil && len(b) > 0; {
		var w int
		w, err = syscall.Write(fd, b)
		b = b[max(w, 0):]
	}
	if err == nil {
		err = syscall.SetNonblock(fd, true)
	}
	if err == nil {
		r := s.readers[i%len(s.readers)]
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd)}
		err = syscall.EpollCtl(r.ep, syscall.EPOLL_CTL_ADD, fd, &ev)
	}
	if err != nil {
		syscall.Close(fd)
		return fmt.Errorf("stream %d from %v: %w", i, netip.AddrFrom4(sourceAddr(i)), err)
	}
	return nil
}

// read is reader r's loop: it reads every stream that has bytes, until the
// stop pipe closes; then it closes its streams.
func (s *streams) read(r *streamReader, ready, hint []byte) {
	defer func() {
		for fd := range r.scans {
			syscall.Close(int(fd))
		}
		syscall.Close(r.ep)
	}()
	events := make([]syscall.EpollEvent, 256)
	buf := make([]byte, 64<<10)
	var scratch []byte
	for {
		k, err := syscall.EpollWait(r.ep, events, -1)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "claimcost: epoll:", err)
			return
		}
		changed := false
		for _, ev := range events[:k] {
			if int(ev.Fd) == s.stop[0] {
				return
			}
			var c bool
			scratch, c = s.drain(r, int(ev.Fd), buf, scratch, ready, hint)
			changed = changed || c
		}
		if changed {
			select {
			case s.poke <- struct{}{}:
			default:
			}
		}
	}
}

// drain reads socket fd until it has nothing more, and counts what the
// stream showed for the first time; a stream that ended is closed.
func (s *streams) drain(r *streamReader, fd int, buf, scratch, ready, hint []byte) ([]byte, bool) {
	sc := r.scans[int32(fd)]
	if sc == nil {
		sc = &sseScan{}
		r.scans[int32(fd)] = sc
	}
	changed := false
	for {
		k, err := syscall.Read(fd, buf)
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
			return scratch, changed
		}
		if err != nil || k == 0 {
			s.ended.Add(1)
			delete(r.scans, int32(fd))
			syscall.Close(fd)
			return scratch, true
		}
		wasFailed := sc.failed
		var nowReady, nowHinted bool
		nowReady, nowHinted, scratch = sc.feed(scratch, buf[:k], ready, hint)
		if sc.failed && !wasFailed {
			s.failed.Add(1)
			changed = true
		}
		if nowReady {
			s.ready.Add(1)
			changed = true
		}
		if nowHinted {
			s.hinted.Add(1)
			storeMax(&s.lastHint, time.Now().UnixNano())
			changed = true
		}
	}
}

// storeMax raises v to x if x is larger.
func storeMax(v *atomic.Int64, x int64) {
	for {
		last := v.Load()
		if x <= last || v.CompareAndSwap(last, x) {
			return
		}
	}
}

// await waits until done says the counts are complete, or until timeout;
// false if the time ran out.
func (s *streams) await(ctx context.Context, timeout time.Duration, done func() bool) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for !done() {
		select {
		case <-s.poke:
		case <-t.C:
			return done()
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// close ends the readers, which close their streams, and waits for them.
func (s *streams) close() {
	syscall.Close(s.stop[1])
	s.wg.Wait()
	syscall.Close(s.stop[0])
}
