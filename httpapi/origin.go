package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// errOtherOrigin means a request authenticated by the dashboard's cookie
// came from a page of another origin: the cookie is the dashboard's, and
// SameSite does not keep it from a sibling host of the same site.
var errOtherOrigin = fmt.Errorf("%w: a page of another origin", errForbidden)

// ownOrigin reports whether origin (an Origin header's value) is this
// server's own origin as r reached it: the scheme and host of the page the
// dashboard is served on. The host is r's Host header (a proxy in front
// must pass it on unchanged); the default port of the scheme may be left
// out on either side. The scheme is https when r came over TLS; from a
// trusted proxy (edge.trusted_proxies) it is what X-Forwarded-Proto says,
// when it says http or https, as the session cookie's Secure flag reads
// it. Otherwise the scheme cannot be known (a proxy that is not trusted
// may have ended TLS) and either is the server's.
func (s *dashboard) ownOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if scheme := s.schemeOf(r); scheme != "" && u.Scheme != scheme {
		return false
	}
	return strings.EqualFold(withoutDefaultPort(u.Host, u.Scheme), withoutDefaultPort(r.Host, u.Scheme))
}

// schemeOf is the scheme r came by, "" when it cannot be known (see
// ownOrigin).
func (s *dashboard) schemeOf(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	if s.edge.FromTrustedProxy(r) {
		if p := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto"))); p == "http" || p == "https" {
			return p
		}
	}
	return ""
}

// withoutDefaultPort drops scheme's default port from host.
func withoutDefaultPort(host, scheme string) string {
	port := map[string]string{"http": ":80", "https": ":443"}[scheme]
	return strings.TrimSuffix(host, port)
}

// sameOrigin reports whether r carries an Origin header naming this
// server's own origin (see ownOrigin); browsers send it with every POST,
// and with any fetch across origins.
func (s *dashboard) sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	return o != "" && s.ownOrigin(r, o)
}

// checkOrigin refuses, with errOtherOrigin, a request whose Origin header
// is present and not this server's own. A request without one (a
// same-origin GET, an EventSource, a client that is not a browser) passes.
func (s *dashboard) checkOrigin(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && !s.ownOrigin(r, o) {
		return errOtherOrigin
	}
	return nil
}

// forbiddenDetail is the detail of the 403 forbidden for err, an
// errForbidden.
func forbiddenDetail(err error) string {
	if errors.Is(err, errOtherOrigin) {
		return "the dashboard's session serves the dashboard's own page only: a request with the cookie from another origin is refused"
	}
	return "the dashboard's requests carry its Origin and CSRF token"
}
