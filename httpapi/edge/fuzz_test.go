package edge

import (
	"strings"
	"testing"
	"time"
)

// FuzzClientAddr: no peer or X-Forwarded-For value panics, a header from an
// untrusted peer is never believed, and the address found is the peer's or
// one written in the header.
func FuzzClientAddr(f *testing.F) {
	f.Add("10.0.0.1:1", "203.0.113.5")
	f.Add("198.51.100.1:1", "1.2.3.4")
	f.Add("[2001:db8:1::5]:443", "[2001:db8:2::1]:443, 10.0.0.2")
	prefixes, err := parseTrusted([]string{"10.0.0.0/8", "2001:db8:1::/48"})
	if err != nil {
		f.Fatal(err)
	}
	trusted := trustSet(prefixes)
	f.Fuzz(func(t *testing.T, peer, xff string) {
		a, ok := clientAddr(peer, []string{xff}, trusted)
		if !ok {
			return
		}
		p, pok := parseHop(peer)
		if !pok {
			t.Fatalf("an address %s from a peer %q that is none", a, peer)
		}
		if !trusted.contains(p) && a != p {
			t.Fatalf("untrusted peer %s: believed %s from %q", p, a, xff)
		}
		if a != p {
			found := false
			for _, hop := range strings.Split(xff, ",") {
				if h, ok := parseHop(strings.TrimSpace(hop)); ok && h == a {
					found = true
				}
			}
			if !found {
				t.Fatalf("address %s is neither the peer %q nor in %q", a, peer, xff)
			}
		}
	})
}

// FuzzVerify: no Authorization value panics the verifier, and none passes
// without the key.
func FuzzVerify(f *testing.F) {
	f.Add("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJ1LTEiLCJleHAiOjk5OTk5OTk5OTl9.")
	f.Add("not.a.jwt")
	f.Add("..")
	v, err := newVerifier(UserTokenConfig{Algorithm: AlgHS256, Secret: testSecret, Leeway: time.Second}, func() time.Time { return now })
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token string) {
		if user, err := v.verify(token); err == nil {
			t.Fatalf("token %q passed for %q without the key", token, user)
		}
	})
}
