package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/dibsio/dibs/waitroom"
)

// Server-sent events of GET …/queue/{user_id}.
const (
	// eventStreamType is the media type a client accepts to get the stream.
	eventStreamType = "text/event-stream"
	// sseHeartbeat is the period of the keep-alive comment line every
	// stream writes, so that proxies and the write deadline never cut an
	// idle stream. Half of Config.StreamIdleTimeout if that is shorter.
	sseHeartbeat = 15 * time.Second
	// sseRetry is the reconnection delay the stream advises (retry:).
	sseRetry = 2 * time.Second
)

// acceptsEventStream says whether r's Accept lists text/event-stream.
func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == eventStreamType {
				return true
			}
		}
	}
	return false
}

// queueStreams serves users' places in the queue as server-sent events,
// from the Watcher, and keeps the streams taken over from net/http.
type queueStreams struct {
	watcher  *waitroom.Watcher
	rooms    *waitingRooms // a stream's first standing
	streams  *streamLimit
	beat     *beat          // the keep-alive clock of the event streams
	detached sync.WaitGroup // the goroutines of the event streams taken over from net/http
	timeout  time.Duration  // Config.RequestTimeout: the first standing's lookup
	idle     time.Duration  // Config.StreamIdleTimeout
	m        *Metrics
}

// events serves GET …/queue/{user_id} as server-sent events when the
// client accepts them and the server has a Watcher; otherwise (HEAD too)
// with h, the JSON answer.
func (s *queueStreams) events(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.watcher == nil || r.Method != http.MethodGet || !acceptsEventStream(r) {
			h(w, r)
			return
		}
		s.streamQueue(w, r)
	}
}

// streamQueue streams a user's standing: an event `status` with the JSON of
// the JSON form first and then each time it changes, a comment line on
// every beat of the server's keep-alive clock, until a final status
// (anything but waiting), the client leaves, or the Watcher stops (the
// instance shuts down). It is one of Config.MaxStreams streamed requests;
// past them it answers overloaded. Problems found before the stream starts
// (unknown user, sold out, ended…) are answered as for the JSON form. An
// open stream checks its user in (the Watcher writes the check-ins of the
// users it serves with its reads), so a watching user keeps the place.
//
// Over HTTP/1 the stream leaves net/http once its head is written: the
// connection is taken over (hijacked) and followed by one goroutine that
// holds nothing but the connection and the watch, so that net/http's
// buffers and its goroutines of the request go back. The answer then ends
// with the connection (Connection: close); a client that left is noticed at
// the next write, a keep-alive at the latest. Where the connection cannot
// be taken over (HTTP/2), the handler follows the stream itself.
func (s *queueStreams) streamQueue(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	user, ok := pathID(w, r, "user_id")
	if !ok {
		return
	}
	d, done, ok := s.streams.beginStream(w, r)
	if !ok {
		return
	}
	detached := false
	defer func() {
		if !detached {
			done()
		}
	}()
	// Watch first, then read: a change between the two is not missed.
	watch, err := s.watcher.Watch(id, user)
	if err != nil {
		problem(CodeUnavailable, "this instance is shutting down; retry shortly").retry(1).write(w, r)
		return
	}
	defer func() {
		if !detached {
			watch.Close()
		}
	}()
	// The lookup's deadline hangs from no cancellable context of the
	// request's, so that it leaves nothing on the request behind it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.timeout)
	st, ok := s.rooms.lookup(w, r.WithContext(ctx), id, user, false)
	cancel()
	if !ok {
		return
	}
	s.m.PositionLookups.WithLabelValues("stream").Inc()
	h := w.Header()
	h.Set("Content-Type", eventStreamType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each event on at once
	first := fmt.Appendf(nil, "retry: %d\n\n", sseRetry.Milliseconds())
	if conn := hijack(w, r, first); conn != nil {
		detached = true
		es := &eventStream{w: conn, d: &streamDeadline{conn: conn, window: s.idle}}
		end := func() {
			watch.Close()
			conn.Close()
			done()
		}
		if !es.send(st) || st.Status.Final() {
			end()
			return
		}
		s.m.SSEStreams.Inc()
		s.detached.Go(func() {
			defer end()
			defer s.m.SSEStreams.Dec()
			s.follow(es, watch, nil)
		})
		return
	}
	s.m.SSEStreams.Inc()
	defer s.m.SSEStreams.Dec()
	w.WriteHeader(http.StatusOK)
	es := &eventStream{w: w, d: d}
	if es.write(first) && es.send(st) && !st.Status.Final() {
		s.follow(es, watch, r.Context().Done())
	}
}

// WaitStreams waits until the event streams taken over from net/http have
// ended: they end when the Watcher stops, or at their next write once their
// client left; http.Server.Shutdown does not wait for them. It returns
// ctx.Err() if ctx ends first.
func (s *Server) WaitStreams(ctx context.Context) error {
	ended := make(chan struct{})
	go func() {
		s.sse.detached.Wait()
		close(ended)
	}()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hijack takes r's HTTP/1 connection over from net/http and writes the
// head of a 200 answer with w's header and Connection: close, then first.
// It returns nil, having written nothing, if the connection cannot be
// taken over, and closes the connection and returns nil if the writes fail.
func hijack(w http.ResponseWriter, r *http.Request, first []byte) net.Conn {
	if r.ProtoMajor != 1 {
		return nil
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil
	}
	h := w.Header()
	h.Set("Connection", "close")
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(&head)
	head.WriteString("\r\n")
	head.Write(first)
	_ = conn.SetWriteDeadline(time.Now().Add(sseRetry * 5))
	if _, err := conn.Write(head.Bytes()); err != nil {
		conn.Close()
		return nil
	}
	return conn
}

// follow writes the watch's standings and the keep-alives to es until a
// final standing, a failed write, the watch's end (the Watcher stopped: the
// client reconnects to an instance that runs) or gone (the client left, as
// net/http tells; nil for a detached stream).
func (s *queueStreams) follow(es *eventStream, watch *waitroom.Watch, gone <-chan struct{}) {
	s.beat.join()
	defer s.beat.leave()
	for {
		select {
		case <-gone:
			return
		case <-watch.Done():
			return
		case st := <-watch.Updates():
			if !es.send(st) || st.Status.Final() {
				return
			}
		case <-s.beat.next():
			if !es.write(keepAlive) {
				return
			}
		}
	}
}

// eventStream writes server-sent events. It belongs to the goroutine that
// follows the stream.
type eventStream struct {
	w    io.Writer
	d    *streamDeadline
	last uint64 // FNV-1a of the data of the last status event
}

// send writes st as a status event unless its data equals the last one's.
// It reports whether the client still reads.
func (e *eventStream) send(st waitroom.Standing) bool {
	data, err := json.Marshal(toQueueOut(st))
	if err != nil {
		return false
	}
	h := fnv.New64a()
	h.Write(data)
	sum := h.Sum64()
	if sum == e.last {
		return true
	}
	e.last = sum
	return e.write(fmt.Appendf(nil, "event: status\ndata: %s\n\n", data))
}

// write pushes the connection's deadlines ahead, writes p and flushes it
// (a connection taken over from net/http has no buffer to flush).
func (e *eventStream) write(p []byte) bool {
	e.d.touch()
	if _, err := e.w.Write(p); err != nil {
		return false
	}
	return e.d.conn != nil || e.d.rc.Flush() == nil
}
