package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/httpapi/edge"
	"github.com/dibsio/dibs/httpapi/ui"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/waitroom"
)

// Defaults of Config.
const (
	DefaultMaxInFlight  = 4096
	DefaultClaimTimeout = 2 * time.Second
	DefaultReadyTimeout = 2 * time.Second

	DefaultMaxReadInFlight = 1024
	DefaultRequestTimeout  = 10 * time.Second

	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultStreamIdleTimeout = 60 * time.Second
	DefaultMaxStreams        = 10_000
	DefaultMaxConns          = 20_000
	DefaultIdempotencyTTL    = 24 * time.Hour
)

// Config configures the API handler.
type Config struct {
	// Manager runs the promotions. Required.
	Manager *promotion.Manager
	// AdminToken is the bearer token of the admin endpoints, named
	// DefaultAdminTokenName in the audit log. Required unless AdminTokens
	// holds one.
	AdminToken string
	// AdminTokens are further named admin tokens; more are issued through
	// the API (POST /v1/admin-tokens) and kept hashed in the database.
	// Defaults to none.
	AdminTokens []AdminToken
	// EraseSecret keys the HMAC-SHA256 that turns an erased user's id into
	// its one-way token (DELETE /v1/users/{user_id}); it must stay the same
	// across restarts and instances. Defaults to none: erasing users is
	// then refused with 404.
	EraseSecret []byte
	// MaxInFlight bounds concurrent claim and grant requests; beyond it
	// requests get 503 overloaded at once. Defaults to DefaultMaxInFlight.
	MaxInFlight int
	// ClaimTimeout bounds one claim's Redis call. Claims that start within
	// an eighth of it share one deadline, so a call gets between 7/8 of it
	// and all of it. Defaults to DefaultClaimTimeout.
	ClaimTimeout time.Duration
	// MaxReadInFlight bounds concurrent requests to the other endpoints
	// (reads and admin calls; not /healthz, /readyz, /metrics). Defaults to
	// DefaultMaxReadInFlight.
	MaxReadInFlight int
	// RequestTimeout bounds those requests, and admin requests that carry an
	// Idempotency-Key. Defaults to DefaultRequestTimeout.
	RequestTimeout time.Duration
	// ReadTimeout is the read deadline of a request that is not streamed:
	// its body must arrive within this time of the handler's start, and a
	// request still running when it passes has its context cancelled.
	// Defaults to DefaultReadTimeout.
	ReadTimeout time.Duration
	// WriteTimeout is the write deadline of a request that is not streamed:
	// its answer must be written within this time of the handler's start,
	// so a client that does not read its answer is cut off and the handler
	// returns. Defaults to DefaultWriteTimeout.
	WriteTimeout time.Duration
	// StreamIdleTimeout is how far each line or event of a streamed request
	// (an NDJSON grant upload) pushes its read and write deadlines ahead:
	// a stream may run for any length of time as long as it never stalls
	// this long. Defaults to DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
	// MaxStreams bounds concurrent streamed requests, whatever their
	// endpoint; beyond it they get 503 overloaded at once. Defaults to
	// DefaultMaxStreams.
	MaxStreams int
	// Redis keeps the records of admin requests sent with an
	// Idempotency-Key. Required.
	Redis rueidis.Client
	// KeyPrefix is prepended to the keys of those records. Defaults to
	// promotion.DefaultPrefix.
	KeyPrefix string
	// IdempotencyTTL is how long the answer of an admin request sent with an
	// Idempotency-Key is kept for its retries. Defaults to
	// DefaultIdempotencyTTL.
	IdempotencyTTL time.Duration
	// Metrics receives the API's metrics. Defaults to a new registry.
	Metrics *Metrics
	// Gatherer serves /metrics. Defaults to the registry New creates for
	// the metrics when Metrics is nil, else to prometheus.DefaultGatherer:
	// pass the registry Metrics was made with.
	Gatherer prometheus.Gatherer
	// Logger receives request errors; the lines a request causes carry
	// its request_id (see LogHandler). Defaults to slog.Default().
	Logger *slog.Logger
	// Watcher pushes the standings of waiting-room users to the streams of
	// GET …/queue/{user_id} asked for as server-sent events (Accept:
	// text/event-stream). Without it those requests get the JSON answer.
	// Defaults to none.
	Watcher *waitroom.Watcher
	// AccessLog logs one line per answered request at Info: method,
	// route, path, status, bytes, took_ms and remote address. Defaults to
	// off.
	AccessLog bool
	// Edge guards the claim and waiting-room endpoints for callers facing
	// browsers: the client address behind trusted proxies, rate limits,
	// user tokens and CORS (see package edge). Its CORS answers the public
	// routes only (join, the user's place in the queue, claim, the
	// promotion's status, a user's own claims and balance), never an admin
	// route. Its AdminToken, KeyPrefix, Logger and Problem are set by New.
	// Defaults to all of it off.
	Edge edge.Config
	// Tally counts this instance's claim answers and issues for the
	// dashboard's charts and the report's refusals; pass the one whose
	// Issued the manager's promotion.Config.OnIssued calls. Defaults to a
	// new one (issues then go uncounted by instance).
	Tally *ui.Tally
}

// Server is the dibs HTTP API as an http.Handler. It serves the
// promotions, claims and records itself; the parts with a job of their own
// are types of their own, each with what it needs: the admin tokens, the
// audit trail, the Idempotency-Key records, the dashboard (its sessions and
// its hub's source), the waiting room's endpoints and event streams, and
// the streamed requests' limit. Every request goes through ServeHTTP, and
// every part answers errors through the one failureLogs.
type Server struct {
	*failureLogs // the problem mapper and the logger, shared by every part
	cfg          Config
	mux          *routeMux
	m            *Metrics
	inflight     chan struct{}
	// claimDeadlines are the deadlines of the claims' Redis calls.
	claimDeadlines claimDeadlines

	readInflight chan struct{}
	edge         *edge.Edge
	hub          *ui.Hub   // the dashboard's snapshots (see dashboard.go)
	started      time.Time // when New made the server: the start of its tally
	rec          records   // the database records beside the promotions (records.go)

	tokens  *adminTokens  // the admin tokens (tokens.go)
	audit   *auditTrail   // the audit trail of admin actions (audit.go)
	idem    *idempotency  // the Idempotency-Key records (idempotency.go)
	dash    *dashboard    // the dashboard's sessions and stream (dashboard.go, origin.go)
	rooms   *waitingRooms // join and a user's standing (queue.go, join.go)
	sse     *queueStreams // the standings as event streams (sse.go)
	streams *streamLimit  // the limit of streamed requests (limits.go)
}

// New returns the API handler; an error names the Config field that
// cannot work.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Metrics == nil {
		reg := prometheus.NewRegistry()
		cfg.Metrics = NewMetrics(reg)
		if cfg.Gatherer == nil {
			cfg.Gatherer = reg
		}
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	tokens, err := cfg.configTokens()
	if err != nil {
		return nil, err
	}
	rec := cfg.Manager.Records()
	s := &Server{
		failureLogs: &failureLogs{log: slog.New(LogHandler(cfg.Logger.Handler()))},
		cfg:         cfg,
		mux:         &routeMux{ServeMux: http.NewServeMux()},
		m:           cfg.Metrics,
		inflight:    make(chan struct{}, cfg.MaxInFlight),

		claimDeadlines: claimDeadlines{timeout: cfg.ClaimTimeout},
		readInflight:   make(chan struct{}, cfg.MaxReadInFlight),
		started:        time.Now(),
		rec:            newRecords(rec),
	}
	ecfg := cfg.Edge
	ecfg.AdminToken, ecfg.Logger, ecfg.Problem = cfg.AdminToken, s.log, edgeProblem
	if ecfg.KeyPrefix == "" {
		ecfg.KeyPrefix = cfg.KeyPrefix
	}
	if s.edge, err = edge.New(ecfg, cfg.Redis); err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	src := &uiSource{manager: cfg.Manager, redis: cfg.Redis, prefix: cfg.KeyPrefix}
	if s.hub, err = ui.NewHub(ui.HubConfig{Source: src.dashboardSource, Logger: s.log, Tally: cfg.Tally}); err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	s.tokens = &adminTokens{failureLogs: s.failureLogs, tokens: tokens, store: rec, readInflight: s.readInflight, m: s.m}
	s.audit = &auditTrail{failureLogs: s.failureLogs, store: rec}
	s.idem = &idempotency{failureLogs: s.failureLogs, redis: cfg.Redis, prefix: cfg.KeyPrefix,
		timeout: cfg.RequestTimeout, ttl: cfg.IdempotencyTTL}
	s.streams = &streamLimit{streams: make(chan struct{}, cfg.MaxStreams), window: cfg.StreamIdleTimeout, m: s.m}
	s.dash = &dashboard{failureLogs: s.failureLogs, redis: cfg.Redis, prefix: cfg.KeyPrefix, timeout: cfg.RequestTimeout,
		idle: cfg.StreamIdleTimeout, tokens: s.tokens, edge: s.edge, hub: s.hub, streams: s.streams, m: s.m}
	s.rooms = &waitingRooms{failureLogs: s.failureLogs, manager: cfg.Manager, watcher: cfg.Watcher, m: s.m}
	s.sse = &queueStreams{watcher: cfg.Watcher, rooms: s.rooms, streams: s.streams,
		beat:    &beat{every: min(sseHeartbeat, cfg.StreamIdleTimeout/2)},
		timeout: cfg.RequestTimeout, idle: cfg.StreamIdleTimeout, m: s.m}
	s.routes()
	return s, nil
}

// withDefaults fills in the zero values (the Metrics and Gatherer are
// filled in by New).
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxReadInFlight == 0 {
		c.MaxReadInFlight = DefaultMaxReadInFlight
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	def(&c.ClaimTimeout, DefaultClaimTimeout)
	def(&c.RequestTimeout, DefaultRequestTimeout)
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.StreamIdleTimeout, DefaultStreamIdleTimeout)
	def(&c.IdempotencyTTL, DefaultIdempotencyTTL)
	if c.KeyPrefix == "" {
		c.KeyPrefix = promotion.DefaultPrefix
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate names the first field that cannot work.
func (c Config) validate() error {
	switch {
	case c.Manager == nil:
		return errors.New("httpapi: Config.Manager is required")
	case c.Redis == nil:
		return errors.New("httpapi: Config.Redis is required")
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"MaxInFlight", c.MaxInFlight}, {"MaxReadInFlight", c.MaxReadInFlight}, {"MaxStreams", c.MaxStreams}} {
		if n.v < 0 {
			return fmt.Errorf("httpapi: Config.%s must not be negative, got %d", n.name, n.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ClaimTimeout", c.ClaimTimeout}, {"RequestTimeout", c.RequestTimeout}, {"ReadTimeout", c.ReadTimeout},
		{"WriteTimeout", c.WriteTimeout}, {"StreamIdleTimeout", c.StreamIdleTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("httpapi: Config.%s must not be negative, got %s", d.name, d.v)
		}
	}
	if c.IdempotencyTTL < time.Second {
		return fmt.Errorf("httpapi: Config.IdempotencyTTL must be at least 1s, got %s", c.IdempotencyTTL)
	}
	return nil
}

// ServeHTTP implements http.Handler. Every request gets its id (see
// RequestID) and the read and write deadlines of Config.ReadTimeout and
// Config.WriteTimeout on its connection; a streamed request pushes them
// ahead as it goes (see beginStream).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	aw := &answerWriter{ResponseWriter: w}
	r = withRequestID(aw, r)
	rc := http.NewResponseController(w)
	// Errors mean the writer has no connection to set deadlines on (a test
	// recorder); nothing to bound then.
	_ = rc.SetReadDeadline(now.Add(s.cfg.ReadTimeout))
	_ = rc.SetWriteDeadline(now.Add(s.cfg.WriteTimeout))
	defer s.observe(aw, r, now) // after a panic's answer below
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "handler panic", "method", r.Method, "path", r.URL.Path, "panic", v)
			problem(CodeUnavailable, "internal error").retry(1).write(aw, r)
		}
	}()
	s.mux.ServeHTTP(aw, r)
}

// edgeProblem writes the edge's problems like every other: the edge picks
// the status (429 for a rate limit, where overloaded is otherwise 503).
func edgeProblem(w http.ResponseWriter, r *http.Request, code string, status int, detail string, retryAfter int) {
	p := problem(code, detail).retry(retryAfter)
	p.Status = status
	p.write(w, r)
}

// guarded puts the edge in front of a claim or waiting-room handler: the
// client address, the user token, and the rate limits of kind.
func (s *Server) guarded(kind edge.Kind, h http.HandlerFunc) http.HandlerFunc {
	if !s.edge.Guards() {
		return h // nothing to check: not a step on the claim path
	}
	return s.edge.ClientIP(s.edge.UserToken(s.edge.RateLimit(kind, promotionOf)(h))).ServeHTTP
}

// userOnly serves a user's own data (claims, place in the queue) only to
// that user when user tokens are on: the request must carry the token of
// the path's user_id, or the admin token. Without user tokens it is h.
func (s *Server) userOnly(h http.HandlerFunc) http.HandlerFunc {
	return s.edge.UserToken(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := edge.CheckUser(r.Context(), r.PathValue("user_id")); err != nil {
			problem(CodeInvalidRequest, "user_id is not the user of the token").withField("user_id").write(w, r)
			return
		}
		h(w, r)
	})).ServeHTTP
}

// promotionOf is the promotion id of a request under /v1/promotions/{id}.
func promotionOf(r *http.Request) string { return r.PathValue("id") }

func (s *Server) routes() {
	s.route("/v1/promotions", map[string]http.HandlerFunc{
		"GET":  s.bounded(s.listPromotions),
		"POST": s.admin(s.bounded(s.idem.idempotent(MaxBodyBytes, s.createPromotion))),
	})
	s.route("/v1/promotions/{id}", map[string]http.HandlerFunc{
		"GET":   s.bounded(s.getPromotion),
		"PATCH": s.admin(s.bounded(s.idem.idempotent(MaxBodyBytes, s.patchPromotion))),
	}, "GET")
	s.route("/v1/promotions/{id}/close", map[string]http.HandlerFunc{"POST": s.admin(s.bounded(s.idem.idempotent(MaxBodyBytes, s.closePromotion)))})
	s.route("/v1/promotions/{id}/archive", map[string]http.HandlerFunc{"POST": s.admin(s.bounded(s.idem.idempotent(MaxBodyBytes, s.archivePromotion)))})
	s.route("/v1/promotions/{id}/rebuild", map[string]http.HandlerFunc{"POST": s.admin(s.bounded(s.idem.idempotent(MaxBodyBytes, s.rebuildPromotion)))})
	s.route("/v1/promotions/{id}/claims", map[string]http.HandlerFunc{
		"POST": s.guarded(edge.KindClaim, s.limited(s.postClaim, true)),
		// The CSV export is streamed (beginStream), so not bounded.
		"GET": s.admin(s.listWinners),
	}, "POST")
	s.route("/v1/promotions/{id}/claims/{user_id}", map[string]http.HandlerFunc{"GET": s.userOnly(s.bounded(s.getClaims))}, "GET")
	// Registered by method alone: a route's catch-all for other methods
	// would overlap GET …/claims/{user_id} (a user named revoke keeps it).
	s.mux.HandleFunc("POST /v1/promotions/{id}/claims/revoke", s.admin(s.bounded(s.idem.idempotent(MaxBodyBytes, s.revokeClaims))))
	s.route("/v1/promotions/{id}/grants", map[string]http.HandlerFunc{"POST": s.admin(s.limited(s.idem.idempotent(MaxGrantBodyBytes, s.postGrants), false))})
	s.route("/v1/promotions/{id}/codes", map[string]http.HandlerFunc{"POST": s.admin(s.limited(s.idem.idempotent(MaxCodesBodyBytes, s.postCodes), false))})
	s.route("/v1/promotions/{id}/queue", map[string]http.HandlerFunc{"POST": s.guarded(edge.KindJoin, s.bounded(s.rooms.queue))}, "POST")
	s.route("/v1/promotions/{id}/queue/{user_id}", map[string]http.HandlerFunc{"GET": s.userOnly(s.sse.events(s.bounded(s.rooms.queue)))}, "GET")
	s.route("/v1/promotions/{id}/report", map[string]http.HandlerFunc{"GET": s.admin(s.bounded(s.getReport))})
	s.route("/v1/promotions/{id}/timeline", map[string]http.HandlerFunc{"GET": s.admin(s.bounded(s.getTimeline))})
	s.route("/v1/promotions/{id}/prequeue", map[string]http.HandlerFunc{"GET": s.admin(s.bounded(s.getPrequeue))})
	s.route("/v1/promotions/{id}/dead-letters", map[string]http.HandlerFunc{"GET": s.admin(s.bounded(s.listDeadLetters))})
	s.route("/v1/promotions/{id}/dead-letters/replay", map[string]http.HandlerFunc{"POST": s.admin(s.bounded(s.idem.idempotent(MaxBodyBytes, s.replayDeadLetters)))})
	s.route("/v1/promotions/{id}/dead-letters/void", map[string]http.HandlerFunc{"POST": s.admin(s.bounded(s.idem.idempotent(MaxBodyBytes, s.voidDeadLetters)))})
	s.route("/v1/claims/{claim_id}", map[string]http.HandlerFunc{"GET": s.admin(s.bounded(s.getClaim))})
	s.route("/v1/events", map[string]http.HandlerFunc{"GET": s.admin(s.bounded(s.getEvents))})
	s.route("/v1/users/{user_id}/balance", map[string]http.HandlerFunc{"GET": s.userOnly(s.bounded(s.getBalance))}, "GET")
	s.route("/v1/audit", map[string]http.HandlerFunc{"GET": s.admin(s.bounded(s.audit.listAudit))})
	s.route("/v1/admin-tokens", map[string]http.HandlerFunc{
		"GET":  s.admin(s.bounded(s.tokens.listAdminTokens)),
		"POST": s.admin(s.bounded(s.idem.idempotent(MaxBodyBytes, s.tokens.createAdminToken))),
	})
	s.route("/v1/admin-tokens/{name}", map[string]http.HandlerFunc{"DELETE": s.admin(s.bounded(s.tokens.deleteAdminToken))})
	s.route("/v1/users/{user_id}", map[string]http.HandlerFunc{"DELETE": s.admin(s.bounded(s.eraseUser))})
	s.route("/healthz", map[string]http.HandlerFunc{"GET": s.healthz})
	s.route("/readyz", map[string]http.HandlerFunc{"GET": s.readyz})
	s.route("/metrics", map[string]http.HandlerFunc{"GET": promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}).ServeHTTP})
	s.route("/openapi.json", map[string]http.HandlerFunc{"GET": serveOpenAPI})
	s.uiRoutes()
	s.pageRoutes()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		problem(CodeNotFound, "no such endpoint").write(w, r)
	})
}

// routeMux is the Server's ServeMux that also keeps, in order, the
// patterns registered with a method ("GET /v1/promotions"): the routes the
// API serves, which the OpenAPI document must describe. Patterns without a
// method are the fallbacks (405 for other methods, 404 for unknown paths),
// not routes. Written by New only; read-only after it.
type routeMux struct {
	*http.ServeMux
	routes []string
}

// Handle registers h for pattern, keeping it if it names a method.
func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.ServeMux.Handle(pattern, h)
	if strings.Contains(pattern, " ") {
		m.routes = append(m.routes, pattern)
	}
}

// HandleFunc registers h for pattern, keeping it if it names a method.
func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// route registers the handlers of one path by method, and a fallback that
// answers other methods with 405 and Allow. public names the methods that
// pages of other origins may call (the edge's CORS, see publicRoutes):
// their handlers get the CORS answers, and the fallback answers the
// path's preflights for them. Every other route has no CORS at all: the
// public ones are those docs/edge.md lists (join, claim, the promotion's
// status and a user's own reads).
func (s *Server) route(path string, byMethod map[string]http.HandlerFunc, public ...string) {
	allow := make([]string, 0, len(byMethod)+1)
	for m, h := range byMethod {
		if slices.Contains(public, m) {
			h = s.edge.CORSMethods(h, m).ServeHTTP
		}
		s.mux.HandleFunc(m+" "+path, h)
		allow = append(allow, m)
		if m == http.MethodGet {
			allow = append(allow, http.MethodHead)
		}
	}
	sort.Strings(allow)
	allowed := strings.Join(allow, ", ")
	var fallback http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allowed)
		problem(CodeMethod, r.Method+" is not allowed here; use "+allowed).write(w, r)
	})
	if len(public) > 0 {
		fallback = s.edge.CORSMethods(fallback, public...)
	}
	s.mux.Handle(path, fallback)
}

// admin wraps h with the bearer-token check and the audit log. The scheme
// is matched case-insensitively (RFC 9110); the token must be one of the
// configured ones or one issued through the API (see adminName). A request
// without an Authorization header may instead carry the dashboard's
// session cookie, with no Origin header or one naming the server's own
// origin, and then, unless it is a GET or HEAD, the page's Origin and the
// session's CSRF token (see uiSessionOf). Every admin request that
// changes something is recorded (see audited), here once for every admin
// route.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		name, err := s.tokens.adminName(r.WithContext(ctx))
		if errors.Is(err, errNoAdmin) && r.Header.Get("Authorization") == "" {
			name, err = s.dash.uiAdmin(r.WithContext(ctx))
		}
		cancel()
		switch {
		case errors.Is(err, errNoAdmin):
			problem(CodeUnauthorized, "this endpoint needs an admin bearer token").write(w, r)
			return
		case errors.Is(err, errForbidden):
			problem(CodeForbidden, forbiddenDetail(err)).write(w, r)
			return
		case errors.Is(err, errShed):
			problem(CodeOverloaded, "too many requests in flight; retry shortly").retry(1).write(w, r)
			return
		case err != nil:
			s.fail(w, r, err)
			return
		}
		s.audit.audited(name, w, r, h)
	}
}

// bounded gives a read or admin request a deadline and a bounded share of
// the instance: beyond MaxReadInFlight concurrent ones it answers 503
// overloaded at once, so a stalled Redis or database cannot pile up
// goroutines.
func (s *Server) bounded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.readInflight <- struct{}{}:
		default:
			s.m.Shed.Inc()
			problem(CodeOverloaded, "too many requests in flight; retry shortly").retry(1).write(w, r)
			return
		}
		defer func() { <-s.readInflight }()
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		h(w, r.WithContext(ctx))
	}
}

// limited sheds load: beyond MaxInFlight concurrent requests it answers 503
// overloaded at once instead of queueing. claims says whether a shed request
// counts in dibs_claims_total.
func (s *Server) limited(h http.HandlerFunc, claims bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.inflight <- struct{}{}:
		default:
			s.m.Shed.Inc()
			if claims {
				s.m.claim(CodeOverloaded)
			}
			problem(CodeOverloaded, "too many requests in flight; retry shortly").retry(1).write(w, r)
			return
		}
		defer func() { <-s.inflight }()
		h(w, r)
	}
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), DefaultReadyTimeout)
	defer cancel()
	if err := s.cfg.Manager.Ready(ctx); err != nil {
		problem(CodeUnavailable, err.Error()).retry(1).write(w, r)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// pathID reads and validates a path identifier.
func pathID(w http.ResponseWriter, r *http.Request, name string) (string, bool) {
	v := r.PathValue(name)
	if !promotion.ValidID(v) {
		problem(CodeInvalidRequest, "malformed "+name+" in path").withField(name).write(w, r)
		return "", false
	}
	return v, true
}
