package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/httpapi/edge"
	"github.com/dibsio/dibs/httpapi/ui"
	"github.com/dibsio/dibs/promotion"
)

// The dashboard at /ui (package ui): a login with an admin token opens a
// session kept in Redis, named by an opaque id in an HttpOnly, SameSite
// Strict cookie; the token itself is never stored in the cookie or sent
// again. The session opens the admin endpoints to the page's own requests:
// reads with the cookie alone, changes only with the page's Origin and
// the session's CSRF token as well.
const (
	// UICookie is the name of the dashboard's session cookie.
	UICookie = "dibs_ui"
	// UISessionTTL is how long a dashboard session lasts after its login.
	UISessionTTL = 12 * time.Hour
	// UICSRFHeader carries the session's CSRF token on the dashboard's
	// requests that change something.
	UICSRFHeader = "X-CSRF-Token"
	// UIMaxPromotions bounds the promotions the dashboard shows: the most
	// recently created ones that are not archived.
	UIMaxPromotions = 50
)

// errForbidden means a dashboard request that changes something lacks the
// page's Origin or the session's CSRF token.
var errForbidden = errors.New("missing or wrong Origin or CSRF token")

// uiSession is a dashboard session as Redis keeps it.
type uiSession struct {
	Name string `json:"name"` // the admin token's name
	// Sum is the hex SHA-256 of the admin token, so a revoked token ends
	// its sessions at once.
	Sum  string `json:"sum"`
	CSRF string `json:"csrf"`
}

// dashboard is the dashboard's HTTP side: its sessions, kept in Redis,
// the own-origin rules of the requests that carry its cookie (origin.go),
// and the stream of its hub's snapshots.
type dashboard struct {
	*failureLogs
	redis   rueidis.Client
	prefix  string        // Config.KeyPrefix
	timeout time.Duration // Config.RequestTimeout: the session check of a stream
	idle    time.Duration // Config.StreamIdleTimeout
	tokens  *adminTokens  // a login's token, and a session's, still valid
	edge    *edge.Edge    // whether a request came from a trusted proxy
	hub     *ui.Hub
	streams *streamLimit
	m       *Metrics
}

// sessionKey is the Redis key of the session whose cookie holds id: the
// key names a digest, so Redis does not hold the cookie's value either.
func (s *dashboard) sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.prefix + "ui:session:" + hex.EncodeToString(sum[:])
}

// uiRoutes mounts the dashboard.
func (s *Server) uiRoutes() {
	files := http.FileServerFS(ui.Assets)
	s.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	})
	s.mux.Handle("GET /ui/", http.StripPrefix("/ui", securePage(files)))
	s.mux.HandleFunc("POST /ui/login", s.bounded(s.dash.uiLogin))
	s.mux.HandleFunc("POST /ui/logout", s.bounded(s.dash.uiLogout))
	s.mux.HandleFunc("GET /ui/session", s.bounded(s.dash.uiSessionInfo))
	s.mux.HandleFunc("GET /ui/events", s.dash.uiEvents)
}

// securePage adds the headers that keep the page to itself: nothing loaded
// or sent elsewhere, no framing, no sniffing, no referrer.
func securePage(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// uiLogin checks an admin token as the admin endpoints do (every named
// token works) and opens a session: 200 {"name", "csrf"} with the cookie,
// or 401 unauthorized. Body: {"token": "..."}.
func (s *dashboard) uiLogin(w http.ResponseWriter, r *http.Request) {
	if !s.sameOrigin(r) {
		problem(CodeForbidden, "log in from the dashboard's own page (Origin)").write(w, r)
		return
	}
	var in struct {
		Token string `json:"token"`
	}
	if pr := decodeJSON(w, r, MaxBodyBytes, &in); pr != nil {
		pr.write(w, r)
		return
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(in.Token)))
	name, err := s.tokens.adminBySum(r.Context(), sum)
	switch {
	case errors.Is(err, errNoAdmin) || in.Token == "":
		problem(CodeUnauthorized, "this is not an admin token").write(w, r)
		return
	case errors.Is(err, errShed):
		problem(CodeOverloaded, "too many requests in flight; retry shortly").retry(1).write(w, r)
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	id, sess := rand.Text()+rand.Text(), uiSession{Name: name, Sum: hex.EncodeToString(sum[:]), CSRF: rand.Text()}
	data, _ := json.Marshal(sess)
	err = s.redis.Do(r.Context(), s.redis.B().Set().Key(s.sessionKey(id)).Value(string(data)).
		Ex(UISessionTTL).Build()).Error()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.setCookie(w, r, id, UISessionTTL)
	s.log.InfoContext(r.Context(), "dashboard login", "actor", name)
	writeJSON(w, http.StatusOK, map[string]string{"name": name, "csrf": sess.CSRF})
}

// setCookie sets (or with ttl 0, clears) the session cookie: HttpOnly,
// SameSite Strict, Secure when the request came over TLS, or over https to
// a trusted proxy.
func (s *dashboard) setCookie(w http.ResponseWriter, r *http.Request, id string, ttl time.Duration) {
	secure := r.TLS != nil || (s.edge.FromTrustedProxy(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
	c := &http.Cookie{Name: UICookie, Value: id, Path: "/", HttpOnly: true, Secure: secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(ttl.Seconds())}
	if ttl == 0 {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// uiLogout ends the session (with its Origin and CSRF token) and clears
// the cookie: 204.
func (s *dashboard) uiLogout(w http.ResponseWriter, r *http.Request) {
	id, _, err := s.uiSessionOf(r)
	switch {
	case errors.Is(err, errNoAdmin):
		s.setCookie(w, r, "", 0)
		w.WriteHeader(http.StatusNoContent)
		return
	case errors.Is(err, errForbidden):
		problem(CodeForbidden, forbiddenDetail(err)).write(w, r)
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	if err := s.redis.Do(r.Context(), s.redis.B().Del().Key(s.sessionKey(id)).Build()).Error(); err != nil {
		s.fail(w, r, err)
		return
	}
	s.setCookie(w, r, "", 0)
	w.WriteHeader(http.StatusNoContent)
}

// uiSessionInfo answers the page's question "am I logged in?": 200
// {"name", "csrf"} or 401.
func (s *dashboard) uiSessionInfo(w http.ResponseWriter, r *http.Request) {
	_, sess, err := s.uiSessionOf(r)
	if err != nil {
		s.uiRefuse(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": sess.Name, "csrf": sess.CSRF})
}

// uiRefuse answers a request whose session check failed with err.
func (s *dashboard) uiRefuse(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errNoAdmin):
		problem(CodeUnauthorized, "log in to the dashboard with an admin token").write(w, r)
	case errors.Is(err, errForbidden):
		problem(CodeForbidden, forbiddenDetail(err)).write(w, r)
	case errors.Is(err, errShed):
		problem(CodeOverloaded, "too many requests in flight; retry shortly").retry(1).write(w, r)
	default:
		s.fail(w, r, err)
	}
}

// uiSessionOf returns r's dashboard session, if its cookie names a live one
// whose admin token is still valid: errNoAdmin otherwise. A request with
// the cookie whose Origin header names another origin gets errOtherOrigin,
// whatever its method (see ownOrigin); one other than GET or HEAD must
// also carry the page's Origin and the session's CSRF token, or it gets
// errForbidden.
func (s *dashboard) uiSessionOf(r *http.Request) (string, uiSession, error) {
	c, err := r.Cookie(UICookie)
	if err != nil || c.Value == "" || len(c.Value) > 128 {
		return "", uiSession{}, errNoAdmin
	}
	if err := s.checkOrigin(r); err != nil {
		return "", uiSession{}, err
	}
	raw, err := s.redis.Do(r.Context(), s.redis.B().Get().Key(s.sessionKey(c.Value)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", uiSession{}, errNoAdmin
	}
	if err != nil {
		return "", uiSession{}, err
	}
	var sess uiSession
	var sum [sha256.Size]byte
	if json.Unmarshal([]byte(raw), &sess) != nil {
		return "", uiSession{}, errNoAdmin
	}
	if n, err := hex.Decode(sum[:], []byte(sess.Sum)); err != nil || n != len(sum) {
		return "", uiSession{}, errNoAdmin
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		csrf := r.Header.Get(UICSRFHeader)
		if !s.sameOrigin(r) || csrf == "" || subtle.ConstantTimeCompare([]byte(csrf), []byte(sess.CSRF)) != 1 {
			return "", uiSession{}, errForbidden
		}
	}
	// The token may have been revoked since the login.
	if _, err := s.tokens.adminBySum(r.Context(), sum); err != nil {
		return "", uiSession{}, err
	}
	return c.Value, sess, nil
}

// uiAdmin is the admin check of a request without an Authorization header:
// the name of its dashboard session's token (see uiSessionOf).
func (s *dashboard) uiAdmin(r *http.Request) (string, error) {
	_, sess, err := s.uiSessionOf(r)
	return sess.Name, err
}

// uiEvents streams the dashboard's snapshots as server-sent events: an
// event `history` with the charts' last minutes, then `snapshot` once per
// second. It is one of Config.MaxStreams streamed requests and one of the
// Hub's ui.DefaultMaxSubscribers dashboards; past either it answers 503
// overloaded.
func (s *dashboard) uiEvents(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	_, _, err := s.uiSessionOf(r.WithContext(ctx))
	cancel()
	if err != nil {
		s.uiRefuse(w, r, err)
		return
	}
	d, done, ok := s.streams.beginStream(w, r)
	if !ok {
		return
	}
	defer done()
	sub, err := s.hub.Subscribe()
	if err != nil {
		s.m.Shed.Inc()
		problem(CodeOverloaded, "too many dashboards open; retry shortly").retry(1).write(w, r)
		return
	}
	defer sub.Close()
	h := w.Header()
	h.Set("Content-Type", eventStreamType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	es := &eventStream{w: w, d: d}
	if !es.write(fmt.Appendf(nil, "retry: %d\n\n", sseRetry.Milliseconds())) {
		return
	}
	heartbeat := time.NewTicker(min(sseHeartbeat, s.idle/2))
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case e := <-sub.C:
			if !es.write(fmt.Appendf(nil, "event: %s\ndata: %s\n\n", e.Name, e.Data)) {
				return
			}
		case <-heartbeat.C:
			if !es.write([]byte(": keep-alive\n\n")) {
				return
			}
		}
	}
}

// Start starts sampling the dashboard's charts every second, whether or
// not a dashboard is open (see ui.Hub); Stop ends it. Without Start the
// charts are sampled only while a dashboard is open.
func (s *Server) Start() { s.hub.Start() }

// Stop ends what Start started, waiting at most until ctx is done.
func (s *Server) Stop(ctx context.Context) error { return s.hub.Stop(ctx) }

// uiSource reads what the dashboard shows, for its hub: the promotions
// from the manager, their issue lags and consumers from Redis.
type uiSource struct {
	manager *promotion.Manager
	redis   rueidis.Client
	prefix  string // Config.KeyPrefix
}

// dashboardSource reads what the dashboard shows: the most recent
// promotions that are not archived, with their counts, waiting rooms,
// issue lags (issueLags) and consumers. The Hub calls it once per interval, whatever the number of
// dashboards.
func (s *uiSource) dashboardSource(ctx context.Context) ([]ui.Promotion, error) {
	vs, _, err := s.manager.ListBy(ctx, promotion.ListQuery{Sort: promotion.SortCreatedAtDesc, Limit: UIMaxPromotions})
	if err != nil {
		return nil, err
	}
	out := make([]ui.Promotion, 0, len(vs))
	segments := make([]int, 0, len(vs))
	for _, v := range vs {
		p := ui.Promotion{ID: v.ID, Name: v.Name, Mode: v.Mode, Kind: v.Kind, State: v.State, Stock: v.Stock,
			Accepted: v.Counts.Accepted, Pending: v.Counts.Pending, Issued: v.Counts.Issued, Failed: v.Counts.Failed,
			Remaining: v.Counts.Remaining, Paused: v.Paused, Consumers: []ui.Consumers{},
			Drained: v.State == promotion.StateEnded && v.Counts.Pending == 0}
		if v.WaitingRoom.Enabled {
			p.Room = &ui.Room{Waiting: v.Room.Waiting, Admitted: v.Room.Admitted, Abandoned: v.Room.Abandoned,
				AdmitPerSecond: v.WaitingRoom.AdmitPerSecond}
		}
		out = append(out, p)
		segments = append(segments, v.Segments)
	}
	s.issueLags(ctx, out, segments, time.Now())
	cmds := make(rueidis.Commands, len(out))
	for i, p := range out {
		cmds[i] = s.redis.B().XinfoConsumers().Key(promotion.WorkStreams(s.prefix, p.ID, 1)[0]).Group(promotion.IssuerGroup).Build()
	}
	for i, res := range s.redis.DoMulti(ctx, cmds...) {
		out[i].Consumers = consumersByInstance(res)
	}
	return out, nil
}

// consumersByInstance groups the consumers XINFO CONSUMERS lists by the
// instance their name carries (stream.ConsumerName): those running, and
// those of a stopped instance that still hold entries. None on an error
// (a promotion whose group is not there yet).
func consumersByInstance(res rueidis.RedisResult) []ui.Consumers {
	list, err := res.ToArray()
	by := map[string]*ui.Consumers{}
	for _, m := range list {
		if err != nil {
			break
		}
		fields, ferr := m.AsMap()
		if ferr != nil {
			continue
		}
		nm, pm := fields["name"], fields["pending"]
		name, _ := nm.ToString()
		pending, _ := pm.AsInt64()
		inst := name
		if i := strings.LastIndex(name, "-consumer-"); i >= 0 {
			inst = name[:i]
		}
		c := by[inst]
		if c == nil {
			c = &ui.Consumers{Instance: inst}
			by[inst] = c
		}
		c.Consumers++
		c.Pending += pending
	}
	out := make([]ui.Consumers, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Instance < out[j].Instance })
	return out
}
