package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dibsio/dibs/events"
	"github.com/dibsio/dibs/internal/testkit/servetest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// TestKill9EventDelivery runs two instances that deliver events to one
// webhook subscriber, claims coming in all along, and kills the delivering
// instance with SIGKILL again and again (restarting it), with the
// subscriber down for a while in between. The subscriber deduplicates on
// Dibs-Event-Id. In the end every event the database holds reached it at
// least once, in order of first receipt, and each was processed once.
func TestKill9EventDelivery(t *testing.T) {
	t.Parallel()
	r := rng(t)
	rounds := pick(3, 8)
	const secret = "faults-events-secret-0123"
	e := newEnv(t, "")

	var (
		down      atomic.Bool
		refused   atomic.Int64 // deliveries answered 503
		mu        sync.Mutex
		processed []string           // event ids, in order of first receipt
		received  = map[string]int{} // deliveries per event id
		seqs      = map[string]int64{}
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		if err := events.Verify([]byte(secret), req.Header.Get(events.HeaderSignature), body, time.Now(), time.Minute); err != nil {
			t.Errorf("delivery with a bad signature: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if down.Load() {
			refused.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		id := req.Header.Get(events.HeaderEventID)
		mu.Lock()
		defer mu.Unlock()
		received[id]++
		if received[id] == 1 {
			processed = append(processed, id)
		}
	}))
	defer hook.Close()

	config := servetest.FastRecovery + fmt.Sprintf(`events:
  lease_ttl_ms: 1500
  timeout_ms: 500
  min_backoff_ms: 20
  max_backoff_ms: 300
  subscribers:
    - name: hook
      url: %s
      secret: %s
`, hook.URL, secret)
	opts := func(name string) serveOpts {
		return serveOpts{redis: e.redis.Addr(), db: e.dbURL, instance: name, config: config}
	}
	procs := map[string]*dibsProc{"a": startDibs(t, opts("a")), "b": startDibs(t, opts("b"))}
	promo := "events"
	createPromotion(t, procs["a"].addr, promo, 100_000, 1)

	// Claims keep coming, through whichever instance answers.
	stop := make(chan struct{})
	var claims sync.WaitGroup
	var addrs atomic.Value
	setAddrs := func() { addrs.Store([]string{procs["a"].addr, procs["b"].addr}) }
	setAddrs()
	claims.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			as := addrs.Load().([]string)
			do(context.Background(), as[n%2], "POST", "/v1/promotions/"+promo+"/claims", fmt.Sprintf(`{"user_id":"u%d"}`, n))
		}
	})

	deliverer := func() string {
		var owner string
		wait.For(t, 30*time.Second, "an instance delivering", func() bool {
			err := e.pool.QueryRow(context.Background(),
				`SELECT owner FROM event_cursors WHERE subscriber = 'hook' AND lease_until > now()`).Scan(&owner)
			return err == nil && owner != ""
		})
		name, _, _ := strings.Cut(owner, "/")
		return name
	}
	delivered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(processed)
	}
	for round := range rounds {
		before := delivered()
		wait.For(t, 30*time.Second, "events delivered", func() bool { return delivered() > before+20 })
		name := deliverer()
		p := procs[name]
		t.Logf("round %d: kill -9 of %s, the delivering instance, after %d events", round, name, delivered())
		p.Signal(syscall.SIGKILL)
		p.WaitExit(10 * time.Second)
		if round%2 == 1 {
			// The subscriber's outage lasts a few refused deliveries,
			// retried with backoff by the instance that took over.
			down.Store(true)
			from, n := refused.Load(), int64(3+r.IntN(5))
			wait.For(t, 30*time.Second, "deliveries refused", func() bool { return refused.Load() >= from+n })
			down.Store(false)
		}
		procs[name] = startDibs(t, opts(name))
		setAddrs()
	}
	close(stop)
	claims.Wait()

	// Every event the database holds reaches the subscriber.
	rows, err := e.pool.Query(context.Background(), `SELECT id, seq FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var (
			id  string
			seq int64
		)
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		seqs[id] = seq
	}
	rows.Close()
	// Wait for these very events, not for as many: an event written by a
	// transaction still open when they were read can have a lower seq
	// than some of them, and is delivered before them.
	wait.For(t, 60*time.Second, fmt.Sprintf("all %d events delivered", len(ids)), func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if received[id] == 0 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	again := 0
	for _, id := range ids {
		switch n := received[id]; {
		case n == 0:
			t.Errorf("event %s (seq %d) never delivered", id, seqs[id])
		case n > 1:
			again++
		}
	}
	for i := 1; i < len(processed); i++ {
		if a, b := seqs[processed[i-1]], seqs[processed[i]]; b != 0 && a >= b {
			t.Errorf("event seq %d first received after seq %d", b, a)
		}
	}
	t.Logf("%d events, each processed once; %d delivered more than once (after a kill)", len(ids), again)
}
