package edge

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Problem codes the edge answers with, as in docs/contract.md.
const (
	CodeUnauthorized   = "unauthorized"
	CodeOverloaded     = "overloaded"
	CodeInvalidRequest = "invalid_request"
)

// Kind names the endpoint a rate limit applies to.
type Kind string

// Kinds of limited endpoints.
const (
	// KindJoin is POST /v1/promotions/{id}/queue.
	KindJoin Kind = "join"
	// KindClaim is POST /v1/promotions/{id}/claims.
	KindClaim Kind = "claim"
)

// Edge holds the parsed configuration and the limiter; its middleware is
// safe for concurrent use.
type Edge struct {
	cfg      Config
	log      *slog.Logger
	trusted  trustSet
	verifier *verifier // nil when user tokens are off
	limiter  limiter   // nil when no limit is set
	cors     *corsPolicy

	// lastFailLog is the unix nanosecond time of the last "limiter
	// unavailable" log line; any request goroutine reads and swaps it.
	lastFailLog atomic.Int64
	// failOpen counts requests let through because the limiter failed.
	failOpen atomic.Int64
}

// New checks cfg and returns the edge. client is the Redis client of the
// rate limits; it may be nil when no limit is set or the local backend is
// chosen.
func New(cfg Config, client rueidis.Client) (*Edge, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	trusted, _ := parseTrusted(cfg.TrustedProxies) // checked by validate
	e := &Edge{cfg: cfg, log: cfg.Logger, trusted: trusted, cors: newCORS(cfg.CORS)}
	if cfg.UserTokens.On() {
		v, err := newVerifier(cfg.UserTokens, cfg.Now)
		if err != nil {
			return nil, err
		}
		e.verifier = v
	}
	rl := cfg.RateLimits
	if rl.Join.PerUser.On() || rl.Join.PerIP.On() || rl.Claim.PerUser.On() || rl.Claim.PerIP.On() {
		switch rl.Backend {
		case BackendRedis:
			if client == nil {
				return nil, errors.New("edge: rate_limits.backend redis needs a Redis client")
			}
			e.limiter = &redisLimiter{client: client, timeout: rl.Timeout}
		case BackendLocal:
			e.limiter = newLocalLimiter(rl.LocalMaxKeys, cfg.Now)
		}
	}
	return e, nil
}

// Wrap applies the whole edge to a join or claim handler, outermost first:
// CORS, ClientIP, UserToken, RateLimit. promotionID returns the request's
// promotion id (r.PathValue("id") under the API's routes).
func (e *Edge) Wrap(kind Kind, promotionID func(*http.Request) string, h http.Handler) http.Handler {
	return e.CORS(e.ClientIP(e.UserToken(e.RateLimit(kind, promotionID)(h))))
}

// Guards reports whether the edge checks anything on a join or claim: user
// tokens or rate limits. When it does not, ClientIP, UserToken and
// RateLimit change nothing, and a caller may leave them out of the path.
func (e *Edge) Guards() bool { return e.verifier != nil || e.limiter != nil }

// FailOpen returns how many requests went through unlimited because the
// rate limiter could not answer.
func (e *Edge) FailOpen() int64 { return e.failOpen.Load() }

type ctxKey int

const (
	keyClientIP ctxKey = iota
	keyUser
	keyAdmin
	keyUserLimited
)

func withClientIP(ctx context.Context, a netip.Addr) context.Context {
	return context.WithValue(ctx, keyClientIP, a)
}

// ClientIPFrom returns the client address ClientIP found for the request.
func ClientIPFrom(ctx context.Context) (netip.Addr, bool) {
	a, ok := ctx.Value(keyClientIP).(netip.Addr)
	return a, ok
}

// UserFrom returns the user id of the request's verified user token.
func UserFrom(ctx context.Context) (string, bool) {
	u, ok := ctx.Value(keyUser).(string)
	return u, ok
}

// IsAdmin reports whether the request carried Config.AdminToken in place
// of a user token.
func IsAdmin(ctx context.Context) bool {
	v, _ := ctx.Value(keyAdmin).(bool)
	return v
}

// WriteProblem is the default ProblemWriter: an application/problem+json
// document of the API's shape, with Retry-After when retryAfter > 0 and
// `WWW-Authenticate: Bearer` on 401.
func WriteProblem(w http.ResponseWriter, r *http.Request, code string, status int, detail string, retryAfter int) {
	p := struct {
		Type     string `json:"type"`
		Title    string `json:"title"`
		Status   int    `json:"status"`
		Code     string `json:"code"`
		Detail   string `json:"detail,omitempty"`
		Instance string `json:"instance,omitempty"`
		Field    string `json:"field,omitempty"`
	}{Type: "about:blank", Title: http.StatusText(status), Status: status, Code: code, Detail: detail}
	switch code {
	case CodeUnauthorized:
		p.Title = "Unauthorized"
	case CodeOverloaded:
		p.Title = "Overloaded"
	}
	if r != nil {
		p.Instance = r.URL.Path
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="dibs"`)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// retrySeconds rounds d up to whole seconds, at least 1.
func retrySeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
