package edge

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// CORS constants: what browsers may send and read.
const (
	corsAllowHeaders   = "Authorization, Content-Type, Idempotency-Key, X-Entry-Token, X-Request-Id"
	corsExposeHeaders  = "Retry-After, Idempotent-Replayed, X-Request-Id"
	corsPreflightVary  = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
	corsMethodsAllowed = "GET HEAD POST"
)

// corsPolicy is the parsed CORS configuration.
type corsPolicy struct {
	any         bool
	origins     []string
	credentials bool
	maxAge      string
}

func newCORS(c CORSConfig) *corsPolicy {
	if len(c.AllowedOrigins) == 0 {
		return nil
	}
	return &corsPolicy{
		any:         slices.Contains(c.AllowedOrigins, "*"),
		origins:     slices.Clone(c.AllowedOrigins),
		credentials: c.AllowCredentials,
		maxAge:      strconv.Itoa(int(c.MaxAge.Seconds())),
	}
}

func (p *corsPolicy) allowed(origin string) bool {
	return origin != "" && (p.any || slices.Contains(p.origins, origin))
}

// CORS returns middleware that lets pages of the allowed origins call h
// from browsers (and does nothing when no origin is allowed). A preflight
// (OPTIONS with Origin and Access-Control-Request-Method) is answered here
// with 204 and never reaches h: with the allowed methods (GET, POST),
// headers (Authorization, Content-Type, Idempotency-Key, X-Entry-Token,
// X-Request-Id) and max age for an allowed origin and method, with no CORS
// header otherwise. Other requests from an allowed origin get
// Access-Control-Allow-Origin (and Allow-Credentials if configured) and
// may read Retry-After, Idempotent-Replayed and X-Request-Id. Every answer carries
// `Vary: Origin`, so caches keep the answers of different origins apart.
func (e *Edge) CORS(h http.Handler) http.Handler {
	return e.CORSMethods(h, http.MethodGet, http.MethodPost)
}

// CORSMethods is CORS for a handler that other origins may call with the
// given methods only (GET, POST or both; GET brings HEAD): a preflight
// asking for another method gets no CORS header, and
// Access-Control-Allow-Methods lists these. It is meant for a path some of
// whose methods are open to browsers on other origins and others not.
func (e *Edge) CORSMethods(h http.Handler, methods ...string) http.Handler {
	p := e.cors
	if p == nil {
		return h
	}
	var allowed []string
	for _, m := range strings.Fields(corsMethodsAllowed) {
		if slices.Contains(methods, m) || (m == http.MethodHead && slices.Contains(methods, http.MethodGet)) {
			allowed = append(allowed, m)
		}
	}
	listed := strings.Join(slices.DeleteFunc(slices.Clone(allowed), func(m string) bool { return m == http.MethodHead }), ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		hd := w.Header()
		reqMethod := r.Header.Get("Access-Control-Request-Method")
		if r.Method == http.MethodOptions && origin != "" && reqMethod != "" {
			hd.Add("Vary", corsPreflightVary)
			if p.allowed(origin) && slices.Contains(allowed, reqMethod) {
				p.allowOrigin(hd, origin)
				hd.Set("Access-Control-Allow-Methods", listed)
				hd.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				hd.Set("Access-Control-Max-Age", p.maxAge)
			} else {
				e.cfg.Metrics.corsPreflightInc()
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		hd.Add("Vary", "Origin")
		if p.allowed(origin) {
			p.allowOrigin(hd, origin)
			hd.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		h.ServeHTTP(w, r)
	})
}

func (p *corsPolicy) allowOrigin(hd http.Header, origin string) {
	if p.any && !p.credentials {
		hd.Set("Access-Control-Allow-Origin", "*")
	} else {
		hd.Set("Access-Control-Allow-Origin", origin)
	}
	if p.credentials {
		hd.Set("Access-Control-Allow-Credentials", "true")
	}
}
