package edge

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// maxForwardedHops bounds how many X-Forwarded-For entries are looked at,
// walking from the right: no real chain of proxies is longer, and a header
// stuffed with thousands of entries costs no more than this.
const maxForwardedHops = 32

// trustSet is the set of trusted proxy networks.
type trustSet []netip.Prefix

func (t trustSet) contains(a netip.Addr) bool {
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr returns the client address of a request that came from peer
// (its RemoteAddr) carrying the X-Forwarded-For values xff. If peer is not
// trusted, xff is ignored and the peer is the client. Otherwise xff is
// walked from the right, past every trusted hop, and the first untrusted
// one is the client: everything left of it was written by a party nobody
// vouches for. If every hop is trusted the leftmost is the client. A
// malformed hop ends the walk: the client is then the last trusted hop
// reached (the proxy that wrote it), never anything to its left. ok is
// false only if peer itself is not an address.
func clientAddr(peer string, xff []string, trusted trustSet) (netip.Addr, bool) {
	addr, ok := parseHop(peer)
	if !ok {
		return netip.Addr{}, false
	}
	if len(trusted) == 0 || !trusted.contains(addr) {
		return addr, true
	}
	seen := 0
	for i := len(xff) - 1; i >= 0; i-- {
		v := xff[i]
		for v != "" && seen < maxForwardedHops {
			var hop string
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				hop, v = v[j+1:], v[:j]
			} else {
				hop, v = v, ""
			}
			hop = strings.TrimSpace(hop)
			if hop == "" {
				continue // "a,,b" or a trailing comma: an empty list element
			}
			seen++
			a, ok := parseHop(hop)
			if !ok {
				return addr, true
			}
			addr = a
			if !trusted.contains(a) {
				return addr, true
			}
		}
		if seen >= maxForwardedHops {
			break
		}
	}
	return addr, true
}

// parseHop parses one address as it appears in RemoteAddr or
// X-Forwarded-For: 192.0.2.1, 192.0.2.1:4711, 2001:db8::1 or
// [2001:db8::1]:4711. IPv4-mapped IPv6 addresses are unmapped; zones are
// refused.
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Addr{}, false
		}
		return a.Unmap(), true
	}
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// clientOf returns the request's client address: the one ClientIP put in
// the context, or else the one computed now.
func (e *Edge) clientOf(r *http.Request) (netip.Addr, bool) {
	if a, ok := ClientIPFrom(r.Context()); ok {
		return a, true
	}
	return clientAddr(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), e.trusted)
}

// ClientIP puts the request's client address in its context, for
// ClientIPFrom, logs and the per-IP limits. It answers nothing itself.
func (e *Edge) ClientIP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := ClientIPFrom(r.Context()); !ok {
			if a, ok := clientAddr(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), e.trusted); ok {
				r = r.WithContext(withClientIP(r.Context(), a))
			}
		}
		h.ServeHTTP(w, r)
	})
}

// FromTrustedProxy reports whether r came straight from one of the trusted
// proxies (Config.TrustedProxies), whose X-Forwarded-* headers can then be
// believed.
func (e *Edge) FromTrustedProxy(r *http.Request) bool {
	a, ok := parseHop(r.RemoteAddr)
	return ok && e.trusted.contains(a)
}
