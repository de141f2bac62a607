package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/dibsio/dibs/waitroom"
)

// Server-sent events of GET …/queue/{user_id}.
const (
	// eventStreamType is the media type a client accepts to get the stream.
	eventStreamType = "text/event-stream"
	// sseHeartbeat is the most time between two writes of a stream: a
	// comment line keeps proxies and the write deadline from cutting an
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

// events serves GET …/queue/{user_id} as server-sent events when the
// client accepts them and the server has a Watcher; otherwise (HEAD too)
// with h, the JSON answer.
func (s *Server) events(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Watcher == nil || r.Method != http.MethodGet || !acceptsEventStream(r) {
			h(w, r)
			return
		}
		s.streamQueue(w, r)
	}
}

// streamQueue streams a user's standing: an event `status` with the JSON of
// the JSON form first and then each time it changes, a comment line as a
// heartbeat, until a final status (anything but waiting), the client
// leaves, or the instance shuts down. It is one of Config.MaxStreams
// streamed requests; past them it answers overloaded. Problems found
// before the stream starts (unknown user, sold out, ended…) are answered
// as for the JSON form. Each event checks the user in (the Watcher re-reads
// the standing with a check-in), so a watching user keeps the place.
func (s *Server) streamQueue(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	user, ok := pathID(w, r, "user_id")
	if !ok {
		return
	}
	d, done, ok := s.beginStream(w, r)
	if !ok {
		return
	}
	defer done()
	// Watch first, then read: a change between the two is not missed.
	watch, err := s.cfg.Watcher.Watch(id, user)
	if err != nil {
		problem(CodeUnavailable, "this instance is shutting down; retry shortly").retry(1).write(w, r)
		return
	}
	defer watch.Close()
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	st, ok := s.lookup(w, r.WithContext(ctx), id, user, false)
	cancel()
	if !ok {
		return
	}
	s.m.PositionLookups.WithLabelValues("stream").Inc()
	s.m.SSEStreams.Inc()
	defer s.m.SSEStreams.Dec()

	h := w.Header()
	h.Set("Content-Type", eventStreamType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each event on at once
	w.WriteHeader(http.StatusOK)
	es := &eventStream{w: w, d: d}
	if !es.write(fmt.Appendf(nil, "retry: %d\n\n", sseRetry.Milliseconds())) || !es.send(st) || st.Status.Final() {
		return
	}
	heartbeat := time.NewTicker(min(sseHeartbeat, s.cfg.StreamIdleTimeout/2))
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-watch.Done():
			return // shutting down: the client reconnects to another instance
		case st := <-watch.Updates():
			if !es.send(st) || st.Status.Final() {
				return
			}
		case <-heartbeat.C:
			if !es.write([]byte(": keep-alive\n\n")) {
				return
			}
		}
	}
}

// eventStream writes server-sent events. It belongs to the request's
// goroutine.
type eventStream struct {
	w    io.Writer
	d    *streamDeadline
	last []byte // data of the last status event
}

// send writes st as a status event unless its data equals the last one's.
// It reports whether the client still reads.
func (e *eventStream) send(st waitroom.Standing) bool {
	data, err := json.Marshal(toQueueOut(st))
	if err != nil || string(data) == string(e.last) {
		return err == nil
	}
	e.last = data
	return e.write(fmt.Appendf(nil, "event: status\ndata: %s\n\n", data))
}

// write pushes the connection's deadlines ahead, writes p and flushes it.
func (e *eventStream) write(p []byte) bool {
	e.d.touch()
	if _, err := e.w.Write(p); err != nil {
		return false
	}
	return e.d.rc.Flush() == nil
}
