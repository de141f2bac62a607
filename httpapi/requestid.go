package httpapi

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
)

// RequestIDHeader names a request: a caller may send its own, and every
// answer carries the one the request was served under.
const RequestIDHeader = "X-Request-Id"

// MaxRequestIDLen is the longest X-Request-Id taken from a caller.
const MaxRequestIDLen = 128

// requestIDAttr is the log attribute and problem member of the id.
const requestIDAttr = "request_id"

type requestIDKey struct{}

// RequestID returns the id of the request ctx belongs to: the caller's
// X-Request-Id when it was valid, else one the server made. Empty outside
// a request of the API.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// validRequestID reports whether a caller's id is taken as it is: 1 to
// MaxRequestIDLen visible ASCII characters (no space, no control).
func validRequestID(id string) bool {
	if id == "" || len(id) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// withRequestID gives r its id — the caller's X-Request-Id if valid, else
// a new random one (an invalid id is replaced, never refused) — answers it
// in the X-Request-Id header of w, and returns r with the id in its
// context, where RequestID, the problems and the log lines find it.
func withRequestID(w http.ResponseWriter, r *http.Request) *http.Request {
	id := r.Header.Get(RequestIDHeader)
	if !validRequestID(id) {
		id = rand.Text()
	}
	w.Header().Set(RequestIDHeader, id)
	return r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
}

// LogHandler returns h adding request_id to every record logged with the
// context of an API request (the *Context methods of slog.Logger, or
// Log). The API wraps its Config.Logger with it; dibs serve wraps the
// logger it gives every part, so a line a request causes in the promotion
// manager names the request too. Wrapping twice adds the id once.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(requestIDHandler); ok {
		return h
	}
	return requestIDHandler{h}
}

type requestIDHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String(requestIDAttr, id))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
