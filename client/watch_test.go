package client_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/client"
	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// lineUp creates a promotion with a waiting room that lets one user in a
// second from now, and joins users u1..un in order.
func lineUp(t *testing.T, c *client.Client, pid string, n int) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: pid, Stock: 10,
		WaitingRoom: &client.WaitingRoomSettings{Enabled: true, AdmitPerSecond: 1}}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := c.JoinQueue(ctx, pid, "u"+string(rune('1'+i))); err != nil {
			t.Fatal(err)
		}
	}
}

// follow runs WatchQueue to its end and returns the standings it yielded;
// each(i) runs after the i-th (from 0).
func follow(t *testing.T, c *client.Client, pid, user string, each func(int), opts ...client.WatchOption) []*client.QueueStanding {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), issueTimeout)
	defer cancel()
	var got []*client.QueueStanding
	for st, err := range c.WatchQueue(ctx, pid, user, opts...) {
		if err != nil {
			t.Fatalf("after %d standings: %v", len(got), err)
		}
		got = append(got, st)
		if each != nil {
			each(len(got) - 1)
		}
	}
	return got
}

// admittedAfterWaiting checks that got is waiting standings whose position
// never rises, then one admitted standing with a token.
func admittedAfterWaiting(t *testing.T, got []*client.QueueStanding) {
	t.Helper()
	if len(got) < 2 {
		t.Fatalf("%d standings, want waiting then admitted", len(got))
	}
	var pos int64 = 1 << 62
	for i, st := range got[:len(got)-1] {
		if st.Status != client.QueueWaiting || st.Position == nil || *st.Position > pos {
			t.Fatalf("standing %d: %+v (position before: %d)", i, st, pos)
		}
		pos = *st.Position
	}
	if last := got[len(got)-1]; last.Status != client.QueueAdmitted || last.EntryToken == "" || last.ExpiresAt == nil {
		t.Fatalf("last standing: %+v", last)
	}
}

// TestWatchQueue: the stream of standings of the third user in line, to
// the admission; the claim with its token is accepted. A user who never
// joined gets not_found and the sequence ends.
func TestWatchQueue(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	pid := id(t, "w")
	lineUp(t, c, pid, 3)
	got := follow(t, c, pid, "u3", nil)
	admittedAfterWaiting(t, got)
	if _, err := c.Claim(t.Context(), pid, "u3", client.EntryToken(got[len(got)-1].EntryToken)); err != nil {
		t.Fatalf("claim with the watched token: %v", err)
	}
	var errs []error
	for st, err := range c.WatchQueue(t.Context(), pid, "nobody") {
		if st != nil {
			t.Fatalf("standing of nobody: %+v", st)
		}
		errs = append(errs, err)
	}
	if len(errs) != 1 || !client.IsProblem(errs[0], client.CodeNotFound) {
		t.Fatalf("errors: %v", errs)
	}
}

// TestWatchQueuePolling: with WatchPolling the same standings come from
// the JSON form.
func TestWatchQueuePolling(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	pid := id(t, "p")
	lineUp(t, c, pid, 2)
	admittedAfterWaiting(t, follow(t, c, pid, "u2", nil, client.WatchPolling()))
}

// TestWatchQueueCutStream: a stream cut under the client (every
// connection through a proxy dropped after the first standing) is opened
// again after the backoff, and the watch goes on to the admission.
func TestWatchQueueCutStream(t *testing.T) {
	t.Parallel()
	px := newCutProxy(t, baseURL(t)[len("http://"):])
	admin := newClient(t)
	pid := id(t, "cut")
	lineUp(t, admin, pid, 3)
	c := newClientAt(t, "http://"+px.addr(), client.WithAdminToken(adminToken))
	var retries atomic.Int64
	got := follow(t, c, pid, "u3", func(i int) {
		if i == 0 {
			px.cut()
		}
	}, client.WatchBackoff(10*time.Millisecond, 100*time.Millisecond),
		client.WatchOnRetry(func(error, time.Duration) { retries.Add(1) }))
	admittedAfterWaiting(t, got)
	if n := px.accepted.Load(); n < 2 || retries.Load() < 1 {
		t.Fatalf("%d connections, %d retries: the stream was not opened again", n, retries.Load())
	}
}

// TestWatchQueueStreamsTaken: where the server's streams are all taken (503
// overloaded), the watch polls the JSON form and still sees the admission.
func TestWatchQueueStreamsTaken(t *testing.T) {
	t.Parallel()
	cfg := serverConfig(redistest.Fresh(t, redisserver.Options{AppendFsync: "off"}).Addr(), t.TempDir())
	cfg.HTTP.MaxStreams = 1
	cfg.WaitingRoom.TickMS = 50
	url := startServer(t, cfg)
	c := newClientAt(t, url, client.WithAdminToken(adminToken))
	lineUp(t, c, "taken", 3)
	// u3's stream takes the one slot until the test ends.
	req, err := http.NewRequestWithContext(t.Context(), "GET", url+"/v1/promotions/taken/queue/u3", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := testHTTPClient(t).Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the stream that takes the slot: %v %v", res, err)
	}
	t.Cleanup(func() { res.Body.Close() })
	admittedAfterWaiting(t, follow(t, c, "taken", "u2", nil))
}

// cutProxy forwards TCP connections to a target and drops them all on
// cut.
type cutProxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int64
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
		}
		p.wg.Go(func() { pipe(out, in) })
		p.wg.Go(func() { pipe(in, out) })
	}
}

// cut drops every connection made so far.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
