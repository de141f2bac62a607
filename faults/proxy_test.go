package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// toxServer is the in-process Toxiproxy server the proxies belong to; its
// HTTP API is never started, the tests drive the proxies directly.
var toxServer = sync.OnceValue(func() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
})

// proxy is a TCP proxy between a dibs process and Redis or the database,
// whose faults the test turns on and off.
type proxy struct {
	t *testing.T
	p *toxiproxy.Proxy

	mu     sync.Mutex
	toxics []string // names of the toxics in place
}

// newProxy starts a proxy to upstream on a free loopback port; it stops
// when the test ends.
func newProxy(t *testing.T, name, upstream string) *proxy {
	t.Helper()
	p := toxiproxy.NewProxy(toxServer(), name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("proxy %s: %v", name, err)
	}
	t.Cleanup(p.Stop)
	return &proxy{t: t, p: p}
}

// addr is the proxy's listening address.
func (x *proxy) addr() string {
	x.p.Lock()
	defer x.p.Unlock()
	return x.p.Listen
}

func (x *proxy) add(name, typ, stream string, attrs string) {
	x.t.Helper()
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := x.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		x.t.Fatalf("proxy %s: add %s: %v", x.p.Name, name, err)
	}
	x.mu.Lock()
	x.toxics = append(x.toxics, name)
	x.mu.Unlock()
}

// blackhole drops every byte in both directions, on open connections and
// new ones alike, and never closes a connection: the far side is simply
// gone, as behind a dead switch.
func (x *proxy) blackhole() {
	x.add("blackhole_up", "timeout", "upstream", `{"timeout":0}`)
	x.add("blackhole_down", "timeout", "downstream", `{"timeout":0}`)
}

// reset answers every byte sent, on open and new connections, with a
// connection reset.
func (x *proxy) reset() {
	x.add("reset_up", "reset_peer", "upstream", `{"timeout":0}`)
	x.add("reset_down", "reset_peer", "downstream", `{"timeout":0}`)
}

// latency delays every reply by d.
func (x *proxy) latency(d time.Duration) {
	x.add("latency_down", "latency", "downstream", fmt.Sprintf(`{"latency":%d}`, d.Milliseconds()))
}

// heal removes every fault. Connections a blackhole held are closed; new
// ones go through.
func (x *proxy) heal() {
	x.t.Helper()
	x.mu.Lock()
	names := x.toxics
	x.toxics = nil
	x.mu.Unlock()
	for _, n := range names {
		if err := x.p.Toxics.RemoveToxic(context.Background(), n); err != nil {
			x.t.Errorf("proxy %s: remove %s: %v", x.p.Name, n, err)
		}
	}
}
