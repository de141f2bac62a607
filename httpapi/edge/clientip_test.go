package edge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted, err := parseTrusted([]string{"10.0.0.0/8", "192.0.2.7", "2001:db8:1::/48"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		peer    string
		xff     []string
		trusted trustSet
		want    string // "" for no address
	}{
		{"no proxies, no header", "198.51.100.1:1234", nil, trusted, "198.51.100.1"},
		{"untrusted peer sends XFF (spoof)", "198.51.100.1:1234", []string{"1.2.3.4"}, trusted, "198.51.100.1"},
		{"no trusted proxies at all", "10.0.0.1:1", []string{"1.2.3.4"}, nil, "10.0.0.1"},
		{"trusted peer, one hop", "10.0.0.1:1", []string{"203.0.113.5"}, trusted, "203.0.113.5"},
		{"trusted peer, no header", "10.0.0.1:1", nil, trusted, "10.0.0.1"},
		{"client prepends a forged hop", "10.0.0.1:1", []string{"1.2.3.4, 203.0.113.5"}, trusted, "203.0.113.5"},
		{"chain of trusted hops", "10.0.0.1:1", []string{"1.2.3.4, 203.0.113.5, 192.0.2.7, 10.9.9.9"}, trusted, "203.0.113.5"},
		{"forged trusted hop left of an untrusted one", "10.0.0.1:1", []string{"10.1.1.1, 203.0.113.5, 10.2.2.2"}, trusted, "203.0.113.5"},
		{"untrusted hop in the middle", "10.0.0.1:1", []string{"203.0.113.9, 198.51.100.7, 10.2.2.2"}, trusted, "198.51.100.7"},
		{"several header lines", "10.0.0.1:1", []string{"1.2.3.4", "203.0.113.5, 10.3.3.3"}, trusted, "203.0.113.5"},
		{"all hops trusted", "10.0.0.1:1", []string{"10.5.5.5, 10.6.6.6"}, trusted, "10.5.5.5"},
		{"malformed rightmost hop", "10.0.0.1:1", []string{"203.0.113.5, garbage"}, trusted, "10.0.0.1"},
		{"malformed hop after a trusted one", "10.0.0.1:1", []string{"garbage, 10.7.7.7"}, trusted, "10.7.7.7"},
		{"malformed left of the client", "10.0.0.1:1", []string{"garbage, 203.0.113.5"}, trusted, "203.0.113.5"},
		{"empty elements", "10.0.0.1:1", []string{" , 203.0.113.5 ,, "}, trusted, "203.0.113.5"},
		{"hop with port", "10.0.0.1:1", []string{"203.0.113.5:4711"}, trusted, "203.0.113.5"},
		{"IPv6 hop", "10.0.0.1:1", []string{"2001:db8:2::1"}, trusted, "2001:db8:2::1"},
		{"bracketed IPv6 hop with port", "10.0.0.1:1", []string{"[2001:db8:2::1]:443"}, trusted, "2001:db8:2::1"},
		{"IPv6 trusted peer", "[2001:db8:1::5]:443", []string{"203.0.113.5"}, trusted, "203.0.113.5"},
		{"IPv4-mapped peer is trusted", "[::ffff:10.0.0.1]:443", []string{"203.0.113.5"}, trusted, "203.0.113.5"},
		{"IPv4-mapped hop is unmapped", "10.0.0.1:1", []string{"::ffff:203.0.113.5"}, trusted, "203.0.113.5"},
		{"zone in hop refused", "10.0.0.1:1", []string{"fe80::1%eth0"}, trusted, "10.0.0.1"},
		{"peer without port", "198.51.100.1", nil, trusted, "198.51.100.1"},
		{"peer not an address", "pipe", []string{"1.2.3.4"}, trusted, ""},
		{"too many hops: the walk stops", "10.0.0.1:1", []string{"203.0.113.5, " + strings.Repeat("10.0.0.2, ", 40) + "10.0.0.3"}, trusted, "10.0.0.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := clientAddr(tc.peer, tc.xff, tc.trusted)
			switch {
			case tc.want == "" && ok:
				t.Fatalf("got %s, want no address", got)
			case tc.want != "" && (!ok || got.String() != tc.want):
				t.Fatalf("got %s (%v), want %s", got, ok, tc.want)
			}
		})
	}
}

func TestClientIPMiddleware(t *testing.T) {
	t.Parallel()
	e := mustNew(t, Config{TrustedProxies: []string{"10.0.0.0/8"}})
	for _, tc := range []struct{ peer, xff, want string }{
		{"10.0.0.1:80", "203.0.113.5", "203.0.113.5"},
		{"198.51.100.1:80", "203.0.113.5", "198.51.100.1"},
	} {
		req := httptest.NewRequest("POST", "/", nil)
		req.RemoteAddr = tc.peer
		req.Header.Set("X-Forwarded-For", tc.xff)
		rec := httptest.NewRecorder()
		e.ClientIP(ok).ServeHTTP(rec, req)
		if got := rec.Header().Get("X-Client"); got != tc.want {
			t.Errorf("peer %s xff %s: client %s, want %s", tc.peer, tc.xff, got, tc.want)
		}
	}
	_ = http.StatusOK
}
