package httpapi

import (
	"context"
	"log/slog"
	"math/rand/v2"
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

// requestContext is the context of a request of the API: its parent's,
// and the request's id. It lives in the request's answerWriter, so giving
// a request its id costs no allocation of its own.
type requestContext struct {
	context.Context
	id string
}

// Value answers requestIDKey with c itself (RequestID reads the id from
// it, boxing nothing), any other key as the parent does.
func (c *requestContext) Value(key any) any {
	if _, ok := key.(requestIDKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// RequestID returns the id of the request ctx belongs to: the caller's
// X-Request-Id when it was valid, else one the server made. Empty outside
// a request of the API.
func RequestID(ctx context.Context) string {
	if c, ok := ctx.Value(requestIDKey{}).(*requestContext); ok {
		return c.id
	}
	return ""
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

// requestIDAlphabet is the base32 alphabet of the ids the server makes
// (RFC 4648, as crypto/rand.Text writes them).
const requestIDAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// newRequestID makes an id: 26 characters of A-Z and 2-7 carrying 128
// random bits of the runtime's generator. The id names a request in the
// logs and is no secret, so it needs no cryptographic source: two ids
// of any number of instances collide only by chance, once in about 2^64
// ids.
func newRequestID() string {
	var b [26]byte
	hi, lo := rand.Uint64(), rand.Uint64()
	for i := range 13 {
		b[i] = requestIDAlphabet[hi&31]
		b[13+i] = requestIDAlphabet[lo&31]
		hi >>= 5
		lo >>= 5
	}
	return string(b[:])
}

// withRequestID gives r its id — the caller's X-Request-Id if valid, else
// a new random one (an invalid id is replaced, never refused) — answers it
// in the X-Request-Id header of aw, and returns r with the id in its
// context, where RequestID, the problems and the log lines find it. The
// context and the header's value live in aw.
func withRequestID(aw *answerWriter, r *http.Request) *http.Request {
	var id string
	if v := r.Header[RequestIDHeader]; len(v) > 0 {
		id = v[0]
	}
	if !validRequestID(id) {
		id = newRequestID()
	}
	aw.idValue[0] = id
	aw.Header()[RequestIDHeader] = aw.idValue[:]
	aw.ctx = requestContext{Context: r.Context(), id: id}
	return r.WithContext(&aw.ctx)
}

// LogHandler returns h adding request_id to every record logged with the
// context of an API request (the *Context methods of slog.Logger, or
// Log). The API wraps its Config.Logger with it; dibs serve wraps the
// logger it gives every part, so a line a request causes in the promotion
// manager names the request too. Wrapping twice adds the id once. The
// wrapper costs a request nothing until a line is logged.
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
