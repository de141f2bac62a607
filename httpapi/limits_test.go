package httpapi_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dibsio/dibs/httpapi"
)

var single = backend{"single", "sqlite"}

// serveOn serves h on l with an http.Server of its own, closed when the test
// ends, and reports each closed connection on the returned channel.
func serveOn(t *testing.T, l net.Listener, h http.Handler) <-chan struct{} {
	t.Helper()
	closed := make(chan struct{}, 64)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- struct{}{}
		}
	}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(l)
	}()
	t.Cleanup(func() {
		_ = hs.Close()
		<-done
	})
	return closed
}

// smallBuffers shrinks the send buffer of every accepted connection, so a
// client that does not read blocks the server's writes at once.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// dialSmall connects to l with a small receive buffer, so the server's
// writes stall as soon as the client stops reading.
func dialSmall(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitFor waits for one value from c within d.
func waitFor(t *testing.T, c <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(d):
		t.Fatalf("%s did not happen within %v", what, d)
	}
}

// TestSlowReaderIsCutAtWriteDeadline: a client that asks for a large answer
// and does not read it holds its handler only until the write deadline; then
// the handler returns and the connection is closed, the answer cut short.
func TestSlowReaderIsCutAtWriteDeadline(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	big := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "big", Help: "A large answer."}, []string{"k"})
	reg.MustRegister(big)
	for i := range 20_000 {
		big.WithLabelValues(fmt.Sprintf("%064d", i)).Set(float64(i))
	}
	e := setupWith(t, single, func(c *httpapi.Config) {
		c.Gatherer = reg
		c.WriteTimeout = 300 * time.Millisecond
	})
	l := listen(t)
	closed := serveOn(t, smallBuffers{l}, e.api)
	c := dialSmall(t, l)
	start := time.Now()
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: dibs\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing: the server must give up on its own.
	waitFor(t, closed, 20*time.Second, "closing the slow reader's connection")
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("connection closed after %v, before the write deadline", took)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection stayed open: %v", err)
	}
	// What the client gets is a prefix of the answer, or a reset.
	if len(got) >= 20_000*64 {
		t.Fatalf("the whole answer (%d bytes) arrived", len(got))
	}
}

// TestStreamedUploadOutlivesDeadlines: an NDJSON upload that takes longer
// than the read and write deadlines in total, but whose lines keep coming,
// is applied in full; a JSON body as slow is cut.
func TestStreamedUploadOutlivesDeadlines(t *testing.T) {
	t.Parallel()
	// Long enough for the admin and read requests around the uploads to be
	// answered on a loaded machine; the uploads take three times as long.
	const deadline = time.Second
	e := setupWith(t, single, func(c *httpapi.Config) {
		c.ReadTimeout = deadline
		c.WriteTimeout = deadline
		c.StreamIdleTimeout = 10 * time.Second
	})
	e.create(t, `{"id":"slow","mode":"grant"}`)

	// slowly sends lines paced by a ticker, for longer than the deadlines in
	// total, and returns the answer.
	slowly := func(contentType string, lines []string) (*http.Response, error) {
		pr, pw := io.Pipe()
		go func() {
			tick := time.NewTicker(deadline / 4)
			defer tick.Stop()
			for _, l := range lines {
				<-tick.C
				if _, err := io.WriteString(pw, l); err != nil {
					return
				}
			}
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", e.url+"/v1/promotions/slow/grants", pr)
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		pr.Close()
		return res, err
	}

	var lines []string
	for i := range 12 { // 12 ticks: three times the deadline
		lines = append(lines, fmt.Sprintf("{\"user_id\":\"u%d\"}\n", i))
	}
	start := time.Now()
	res, err := slowly("application/x-ndjson", lines)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted || !strings.Contains(string(raw), `"enqueued":12`) {
		t.Fatalf("slow NDJSON upload: %d %s", res.StatusCode, raw)
	}
	if took := time.Since(start); took < 2*deadline {
		t.Fatalf("the upload took %v, not longer than the deadlines", took)
	}

	parts := []string{`{"user_ids":[`}
	for i := range 11 {
		parts = append(parts, fmt.Sprintf(`"j%d",`, i))
	}
	parts = append(parts, `"j11"]}`)
	res, err = slowly("application/json", parts)
	if err == nil {
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusAccepted {
			t.Fatalf("a JSON body slower than the read deadline was applied: %s", raw)
		}
	}
	if c := e.counts(t, "slow"); c["accepted"].(float64) != 12 {
		t.Fatalf("counts after the cut JSON upload: %v", c)
	}
}

// TestConnectionCap: with a cap of two connections, a third is not served
// until one of the two closes.
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	e := setup(t, single)
	l := listen(t)
	serveOn(t, httpapi.LimitListener(l, 2), e.api)

	type client struct {
		c net.Conn
		r *bufio.Reader
	}
	ask := func(cl client) error {
		_, err := io.WriteString(cl.c, "GET /healthz HTTP/1.1\r\nHost: dibs\r\n\r\n")
		return err
	}
	answer := func(cl client, within time.Duration) (*http.Response, error) {
		_ = cl.c.SetReadDeadline(time.Now().Add(within))
		res, err := http.ReadResponse(cl.r, nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		return res, err
	}
	var cs []client
	for range 3 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, client{c, bufio.NewReader(c)})
	}
	for _, cl := range cs[:2] {
		if err := ask(cl); err != nil {
			t.Fatal(err)
		}
		if res, err := answer(cl, 10*time.Second); err != nil || res.StatusCode != 200 {
			t.Fatalf("one of the first two connections: %v %v", res, err)
		}
	}
	// Both stay open (keep-alive): the third waits.
	if err := ask(cs[2]); err != nil {
		t.Fatal(err)
	}
	if res, err := answer(cs[2], 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the third connection was served over the cap: %v %v", res, err)
	}
	cs[0].c.Close()
	if res, err := answer(cs[2], 10*time.Second); err != nil || res.StatusCode != 200 {
		t.Fatalf("the third connection once the first closed: %v %v", res, err)
	}
}

// TestLimitListenerClose: closing the listener ends an Accept waiting for a
// slot.
func TestLimitListenerClose(t *testing.T) {
	t.Parallel()
	l := httpapi.LimitListener(listen(t), 1)
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		errc <- err
	}()
	l.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waiting after Close")
	}
}

// TestStreamsCap: beyond MaxStreams streamed requests a new one gets 503
// overloaded with Retry-After, while JSON requests still pass; once the
// stream ends the next one is admitted.
func TestStreamsCap(t *testing.T) {
	t.Parallel()
	e := setupWith(t, single, func(c *httpapi.Config) { c.MaxStreams = 1 })
	e.create(t, `{"id":"many","mode":"grant"}`)
	upload := func(body io.Reader) response {
		req, _ := http.NewRequest("POST", e.url+"/v1/promotions/many/grants", body)
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return response{status: -1, raw: err.Error()}
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		out := response{status: res.StatusCode, header: res.Header, raw: string(raw)}
		_ = json.Unmarshal(raw, &out.body)
		return out
	}

	// The first upload sends one batch (500 lines) and holds its stream open.
	pr, pw := io.Pipe()
	firstDone := make(chan response, 1)
	go func() { firstDone <- upload(pr) }()
	var batch strings.Builder
	for i := range 500 {
		fmt.Fprintf(&batch, "{\"user_id\":\"s%d\"}\n", i)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.WriteString(pw, batch.String())
	}()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for e.counts(t, "many")["accepted"].(float64) < 500 {
		if time.Now().After(deadline) {
			t.Fatal("the first upload's batch was never applied")
		}
		<-tick.C
	}

	r := upload(strings.NewReader(`{"user_id":"late"}` + "\n"))
	if r.status != http.StatusServiceUnavailable || r.code() != "overloaded" || r.header.Get("Retry-After") == "" {
		t.Fatalf("a second stream: %d %s, want 503 overloaded with Retry-After", r.status, r.raw)
	}
	if r := e.admin(t, "POST", "/v1/promotions/many/grants", `{"user_ids":["json"]}`); r.status != http.StatusAccepted {
		t.Fatalf("a JSON grant while the stream runs: %d %s", r.status, r.raw)
	}
	pw.Close()
	wg.Wait()
	if first := <-firstDone; first.status != http.StatusAccepted || first.body["enqueued"] != float64(500) {
		t.Fatalf("first upload: %d %s", first.status, first.raw)
	}
	if r := upload(strings.NewReader(`{"user_id":"late"}` + "\n")); r.status != http.StatusAccepted {
		t.Fatalf("a stream after the first ended: %d %s", r.status, r.raw)
	}
}
