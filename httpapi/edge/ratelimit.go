package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/ident"
)

// failLogEvery spaces the "limiter unavailable" log lines: an outage logs
// one line per interval, not one per request.
const failLogEvery = 10 * time.Second

// rule is one bucket a request must find room in.
type rule struct {
	key      string
	scope    string // ScopeUser or ScopeIP, for the metrics
	interval int64  // microseconds between two requests at the steady rate
	burst    int64
}

func ruleFor(key, scope string, l Limit) rule {
	return rule{key: key, scope: scope, interval: max(int64(l.Window/time.Microsecond)/int64(l.Requests), 1), burst: int64(l.Burst)}
}

// limiter decides whether a request finds room in every one of its rules.
// It takes one request from each rule only when all have room; wait is
// then 0, else the longest time until the full ones have room again, and
// full the index of the rule with that wait.
type limiter interface {
	allow(ctx context.Context, rules []rule) (ok bool, wait time.Duration, full int, err error)
}

// gcra decides one request against a bucket (the generic cell rate
// algorithm, a token bucket kept as one number): tat is the bucket's
// theoretical arrival time, the time at which it would be empty again, 0
// for an unknown bucket. A request is let through if tat, after adding one
// interval, is no more than burst intervals ahead of now; newTAT is the
// bucket's time after it. All values are microseconds. The Lua script
// limitScript computes the same.
func gcra(now, tat, interval, burst int64) (newTAT int64, ok bool, wait int64) {
	tat = max(tat, now)
	newTAT = tat + interval
	if allowAt := newTAT - burst*interval; now < allowAt {
		return tat, false, allowAt - now
	}
	return newTAT, true, 0
}

// limitScript runs gcra over every bucket of one request, on Redis's clock.
//
// KEYS: the buckets, all under one promotion's hash tag.
// ARGV: for each key in order, its interval and its burst (microseconds,
// count).
// Reply: {1, 0, 0} when every bucket had room, and each then took the
// request (stored as its new TAT, expiring when it is empty again); or
// {0, wait, i} when one had not, and none took anything: wait is the
// longest microseconds until the full ones have room, i the 1-based index
// of the key with that wait.
var limitScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tats = {}
local wait = 0
local full = 0
for i = 1, #KEYS do
  local interval = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', KEYS[i])) or now
  if tat < now then tat = now end
  local new = tat + interval
  local allow_at = new - burst * interval
  if now < allow_at and allow_at - now > wait then
    wait = allow_at - now
    full = i
  end
  tats[i] = new
end
if wait > 0 then return {0, wait, full} end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], string.format('%d', tats[i]), 'PX', string.format('%d', math.ceil((tats[i] - now) / 1000)))
end
return {1, 0, 0}
`)

// redisLimiter keeps the buckets in Redis.
type redisLimiter struct {
	client  rueidis.Client
	timeout time.Duration
}

func (l *redisLimiter) allow(ctx context.Context, rules []rule) (bool, time.Duration, int, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	keys := make([]string, len(rules))
	args := make([]string, 0, 2*len(rules))
	for i, r := range rules {
		keys[i] = r.key
		args = append(args, fmt.Sprint(r.interval), fmt.Sprint(r.burst))
	}
	reply, err := limitScript.Exec(ctx, l.client, keys, args).ToArray()
	if err != nil {
		return false, 0, 0, fmt.Errorf("rate limit: %w", err)
	}
	if len(reply) != 3 {
		return false, 0, 0, fmt.Errorf("rate limit: unexpected reply of %d elements", len(reply))
	}
	ok, err1 := reply[0].AsInt64()
	wait, err2 := reply[1].AsInt64()
	full, err3 := reply[2].AsInt64()
	if err := errors.Join(err1, err2, err3); err != nil {
		return false, 0, 0, fmt.Errorf("rate limit: %w", err)
	}
	return ok == 1, time.Duration(wait) * time.Microsecond, max(int(full)-1, 0), nil
}

// errLocalFull: the local table is full of buckets that are not empty.
var errLocalFull = errors.New("rate limit: local table full")

// localLimiter keeps the buckets in this process. mu guards tats.
type localLimiter struct {
	now     func() time.Time
	maxKeys int

	mu   sync.Mutex
	tats map[string]int64 // key → TAT in unix microseconds
}

func newLocalLimiter(maxKeys int, now func() time.Time) *localLimiter {
	return &localLimiter{now: now, maxKeys: maxKeys, tats: make(map[string]int64)}
}

func (l *localLimiter) allow(_ context.Context, rules []rule) (bool, time.Duration, int, error) {
	now := l.now().UnixMicro()
	l.mu.Lock()
	defer l.mu.Unlock()
	var wait int64
	full := 0
	news := make([]int64, len(rules))
	for i, r := range rules {
		n, ok, w := gcra(now, l.tats[r.key], r.interval, r.burst)
		if !ok && w > wait {
			wait, full = w, i
		}
		news[i] = n
	}
	if wait > 0 {
		return false, time.Duration(wait) * time.Microsecond, full, nil
	}
	for _, r := range rules {
		if _, ok := l.tats[r.key]; !ok && len(l.tats) >= l.maxKeys {
			l.sweep(now)
			if len(l.tats) >= l.maxKeys {
				return false, 0, 0, errLocalFull
			}
		}
	}
	for i, r := range rules {
		l.tats[r.key] = news[i]
	}
	return true, 0, 0, nil
}

// sweep drops the buckets that are empty by now: an absent bucket means
// the same.
func (l *localLimiter) sweep(now int64) {
	for k, tat := range l.tats {
		if tat <= now {
			delete(l.tats, k)
		}
	}
}

// limits returns the limits of kind.
func (e *Edge) limits(kind Kind) Limits {
	if kind == KindJoin {
		return e.cfg.RateLimits.Join
	}
	return e.cfg.RateLimits.Claim
}

// bucketBase is the key prefix of a promotion's buckets for kind, under
// the promotion's hash tag.
func (e *Edge) bucketBase(kind Kind, promotionID string) string {
	return e.cfg.KeyPrefix + "{" + promotionID + "}:edge:" + string(kind) + ":"
}

// ipKey is the client part of a per-IP bucket: the address, or for IPv6
// its network of IPv6PrefixLen bits.
func (e *Edge) ipKey(a netip.Addr) string {
	if a.Is6() {
		if p, err := a.Prefix(e.cfg.RateLimits.IPv6PrefixLen); err == nil {
			return p.String()
		}
	}
	return a.String()
}

// RateLimit returns middleware that applies kind's limits of the request's
// promotion (promotionID returns its id; a request whose id is malformed
// is passed on unlimited, for the handler to refuse): the per-IP limit on
// the client address, and the per-user limit on the user of a verified
// user token (for a user known only from the body, the handler calls
// LimitUser). Both are checked in one step and a request refused by one
// spends nothing of the other. Past a limit the request is answered 429
// overloaded with Retry-After and goes no further. If the limiter cannot
// answer (Redis unreachable or slow), the request goes on unlimited and a
// line is logged at most every ten seconds: see docs/edge.md.
func (e *Edge) RateLimit(kind Kind, promotionID func(*http.Request) string) func(http.Handler) http.Handler {
	lim := e.limits(kind)
	return func(h http.Handler) http.Handler {
		if e.limiter == nil || (!lim.PerIP.On() && !lim.PerUser.On()) {
			return h
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			promo := promotionID(r)
			if !ident.Valid(promo) {
				h.ServeHTTP(w, r)
				return
			}
			base := e.bucketBase(kind, promo)
			rules := make([]rule, 0, 2)
			if lim.PerIP.On() {
				if a, ok := e.clientOf(r); ok {
					rules = append(rules, ruleFor(base+"ip:"+e.ipKey(a), ScopeIP, lim.PerIP))
				}
			}
			if user, ok := UserFrom(r.Context()); ok && lim.PerUser.On() {
				rules = append(rules, ruleFor(base+"user:"+user, ScopeUser, lim.PerUser))
				r = r.WithContext(context.WithValue(r.Context(), keyUserLimited, user))
			}
			if e.check(w, r, rules) {
				h.ServeHTTP(w, r)
			}
		})
	}
}

// LimitUser applies kind's per-user limit of promotion promotionID to
// userID, for handlers that learn the user from the request body (user
// tokens off). It returns true if the request may go on; false means it
// was answered 429 overloaded. A user RateLimit already counted from the
// request's token is not counted twice. Without user tokens anyone can
// send another user's id: see docs/edge.md before turning per_user limits
// on for callers that are not trusted.
func (e *Edge) LimitUser(w http.ResponseWriter, r *http.Request, kind Kind, promotionID, userID string) bool {
	lim := e.limits(kind).PerUser
	if e.limiter == nil || !lim.On() || !ident.Valid(promotionID) || !ident.Valid(userID) {
		return true
	}
	if done, _ := r.Context().Value(keyUserLimited).(string); done == userID {
		return true
	}
	return e.check(w, r, []rule{ruleFor(e.bucketBase(kind, promotionID)+"user:"+userID, ScopeUser, lim)})
}

// check asks the limiter about rules; it answers 429 and returns false
// when the request must stop.
func (e *Edge) check(w http.ResponseWriter, r *http.Request, rules []rule) bool {
	if len(rules) == 0 {
		return true
	}
	ok, wait, full, err := e.limiter.allow(r.Context(), rules)
	if err != nil {
		e.failOpen.Add(1)
		now := time.Now().UnixNano()
		if last := e.lastFailLog.Load(); now-last >= int64(failLogEvery) && e.lastFailLog.CompareAndSwap(last, now) {
			e.log.WarnContext(r.Context(), "rate limiter unavailable; requests go on unlimited", "err", err, "unlimited_so_far", e.failOpen.Load())
		}
		return true
	}
	if !ok {
		e.cfg.Metrics.rateLimitedInc(rules[full].scope)
		secs := retrySeconds(wait)
		e.cfg.Problem(w, r, CodeOverloaded, http.StatusTooManyRequests,
			fmt.Sprintf("too many requests; retry in %d s", secs), secs)
		return false
	}
	return true
}
