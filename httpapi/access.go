package httpapi

import (
	"net/http"
	"time"
)

// answerWriter remembers the status and size of the answer written through
// it, for the request metrics and the access log. Unwrap keeps
// http.ResponseController (deadlines, flushes, full duplex) working.
//
// It is also what the server keeps of one request, in this one allocation:
// the request's context with its id (see withRequestID), the id's header
// value, the claim's context (see claimDeadlines) and scratch space for the
// claim's body and answer (see scratchOf).
type answerWriter struct {
	http.ResponseWriter
	code    int
	bytes   int64
	flushed bool // an answer went out before the handler returned

	ctx     requestContext
	idValue [1]string
	claim   claimContext
	scratch [scratchLen]byte
}

// scratchLen is the scratch space of a request: a claim's body and its
// answer fit.
const scratchLen = 128

// scratchOf returns w's scratch space, empty: the answerWriter's when w is
// one (the claim routes get it as it is), else a new buffer.
func scratchOf(w http.ResponseWriter) []byte {
	if aw, ok := w.(*answerWriter); ok {
		return aw.scratch[:0]
	}
	return make([]byte, 0, scratchLen)
}

func (w *answerWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *answerWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// FlushError flushes the writer underneath, for http.ResponseController,
// and remembers that an answer went out (a stream's).
func (w *answerWriter) FlushError() error {
	w.flushed = true
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the writer underneath, for http.ResponseController.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// routeOf is the route label of r once the mux has seen it: the pattern
// that matched, RouteUnmatched for the catch-all.
func (s *Server) routeOf(r *http.Request) string {
	pattern := r.Pattern
	if pattern == "" {
		// A wrapper before the mux (CORS) may have answered, or passed the
		// mux a copy of r: ask the mux which pattern r matches.
		_, pattern = s.mux.Handler(r)
	}
	if pattern == "" || pattern == "/" {
		return RouteUnmatched
	}
	return pattern
}

// observe counts the answered request and, with Config.AccessLog, logs it.
// A request whose client left before the answer counts as
// StatusClientClosedRequest.
func (s *Server) observe(w *answerWriter, r *http.Request, start time.Time) {
	took := time.Since(start)
	route := s.routeOf(r)
	code := w.code
	if code == 0 {
		code = http.StatusOK // nothing written: net/http answers 200
	}
	if clientLeft(r) && !w.flushed {
		// The client hung up before any answer went out: whatever the
		// handler wrote reached no one, and no failure of the server is
		// counted for it.
		s.log.Debug("client left before the answer", "method", r.Method, "route", route, "path", r.URL.Path,
			"answered", code, "took_ms", took.Milliseconds())
		code = StatusClientClosedRequest
	}
	s.m.request(route, code, took.Seconds())
	if s.cfg.AccessLog {
		s.log.InfoContext(r.Context(), "request", "method", r.Method, "route", route, "path", r.URL.Path, "status", code,
			"bytes", w.bytes, "took_ms", took.Milliseconds(), "remote", r.RemoteAddr)
	}
}
