package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/waitroom"
)

// watched is setupWith on backend b with a running Watcher of the API's
// rooms, and tune (if not nil) applied after.
func watched(t *testing.T, b backend, tune func(*httpapi.Config)) *env {
	t.Helper()
	return setupWith(t, b, func(cfg *httpapi.Config) {
		w := waitroom.NewWatcher(cfg.Manager.Rooms(), waitroom.WatcherConfig{Logger: slog.New(slog.DiscardHandler)})
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := w.Stop(ctx); err != nil {
				t.Errorf("stop watcher: %v", err)
			}
		})
		cfg.Watcher = w
		if tune != nil {
			tune(cfg)
		}
	})
}

// otherInstance runs the waiting-room scheduler of another instance on
// the topology named redis over e's keys, ticking every 20ms the rooms e's
// manager knows, until the test ends. It has no watcher: its ticks reach e's streams only through
// the rooms' hints.
func otherInstance(t *testing.T, e *env, redis string) {
	t.Helper()
	for _, tp := range redistest.Topologies(t) {
		if tp.Name != redis {
			continue
		}
		rooms, err := waitroom.New(tp.Client(t), waitroom.Config{Prefix: e.prefix, Keys: testRoomKeys, Instance: "other",
			TickInterval: 20 * time.Millisecond, Known: e.mgr.KnownRooms, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		s := waitroom.NewScheduler(rooms)
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.Stop(ctx); err != nil {
				t.Errorf("stop scheduler: %v", err)
			}
		})
		return
	}
	t.Fatalf("no topology %q", redis)
}

// sseStream is a client's stream of server-sent events.
type sseStream struct {
	res *http.Response
	r   *bufio.Reader
}

// event is one server-sent event.
type event struct {
	name string
	data map[string]any
	raw  string
}

// openEvents asks for user's standing in promo as server-sent events. The
// stream is closed when the test ends; a stream not answered 200 is
// returned with its body read into raw.
func (e *env) openEvents(t *testing.T, promo, user string) (*sseStream, response) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/promotions/"+promo+"/queue/"+user, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("events of %s: %v", user, err)
	}
	t.Cleanup(func() { res.Body.Close() })
	out := response{status: res.StatusCode, header: res.Header}
	if res.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(res.Body)
		out.raw = string(raw)
		_ = json.Unmarshal(raw, &out.body)
		return nil, out
	}
	return &sseStream{res: res, r: bufio.NewReader(res.Body)}, out
}

// next reads the next event; ok false at the end of the stream. Comments
// and the retry field are skipped.
func (s *sseStream) next(t *testing.T) (ev event, ok bool) {
	t.Helper()
	for {
		line, err := s.r.ReadString('\n')
		if err == io.EOF && line == "" {
			return ev, false
		}
		if err != nil {
			t.Fatalf("read event: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.name != "" || ev.raw != "" {
				if err := json.Unmarshal([]byte(ev.raw), &ev.data); err != nil {
					t.Fatalf("event data %q: %v", ev.raw, err)
				}
				return ev, true
			}
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry: "):
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.raw += strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
}

// until reads status events until one has status want, failing on a
// status other than waiting on the way.
func (s *sseStream) until(t *testing.T, want string) event {
	t.Helper()
	for {
		ev, ok := s.next(t)
		if !ok {
			t.Fatalf("stream ended before %s", want)
		}
		if ev.name != "status" {
			t.Fatalf("event %q", ev.name)
		}
		if st := ev.data["status"]; st == want {
			return ev
		} else if st != "waiting" {
			t.Fatalf("status %v before %s: %s", st, want, ev.raw)
		}
	}
}

// ended checks that the stream ends with no further event.
func (s *sseStream) ended(t *testing.T) {
	t.Helper()
	if ev, ok := s.next(t); ok {
		t.Fatalf("event after the final one: %s", ev.raw)
	}
}

// TestQueueEvents: a user waiting on a stream sees the position, then the
// admission made by another instance's scheduler, with a token that
// claims; the user behind sees the promotion sell out; both streams end.
func TestQueueEvents(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			e := watched(t, b, nil)
			e.roomed(t, "wr", 1)
			e.join(t, "wr", "u1")
			e.join(t, "wr", "u2")
			s1, r := e.openEvents(t, "wr", "u1")
			if s1 == nil || r.header.Get("Content-Type") != "text/event-stream" || r.header.Get("Cache-Control") != "no-store" {
				t.Fatalf("events of u1: %d %v %s", r.status, r.header, r.raw)
			}
			s2, _ := e.openEvents(t, "wr", "u2")
			first := s1.until(t, "waiting")
			if first.data["position"] != float64(1) || first.data["poll_after_ms"] == nil || first.data["entry_token"] != nil {
				t.Fatalf("first event of u1: %s", first.raw)
			}
			if ev := s2.until(t, "waiting"); ev.data["position"] != float64(2) {
				t.Fatalf("first event of u2: %s", ev.raw)
			}

			otherInstance(t, e, b.redis)
			ev := s1.until(t, "admitted")
			tok, _ := ev.data["entry_token"].(string)
			if tok == "" || ev.data["expires_at"] == nil {
				t.Fatalf("admitted event: %s", ev.raw)
			}
			s1.ended(t)
			if r := e.claim(t, "wr", "u1", "X-Entry-Token", tok); r.status != http.StatusAccepted {
				t.Fatalf("claim with the streamed token: %d %s", r.status, r.raw)
			}
			s2.until(t, "sold_out")
			s2.ended(t)

			m := e.do(t, "GET", "/metrics", "")
			if !strings.Contains(m.raw, `dibs_waitroom_position_lookups_total{form="stream"} 2`) ||
				!strings.Contains(m.raw, "dibs_waitroom_joins_total 2") {
				t.Fatalf("metrics:\n%s", m.raw)
			}
			wait.For(t, 5*time.Second, "no stream open", func() bool {
				return strings.Contains(e.do(t, "GET", "/metrics", "").raw, "dibs_waitroom_sse_streams 0")
			})
		})
	}
}

// TestQueueEventsRefusals: the stream limit answers overloaded and leaves
// the JSON form alone; what the JSON form refuses, the stream refuses the
// same way before it starts.
func TestQueueEventsRefusals(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			e := watched(t, b, func(cfg *httpapi.Config) { cfg.MaxStreams = 1 })
			e.roomed(t, "wr", 5)
			e.join(t, "wr", "u1")
			if _, r := e.openEvents(t, "wr", "nobody"); r.status != http.StatusNotFound || r.code() != "not_found" {
				t.Fatalf("events of a user who never joined: %d %s", r.status, r.raw)
			}
			if _, r := e.openEvents(t, "wr", "-x"); r.status != http.StatusBadRequest || r.code() != "invalid_request" {
				t.Fatalf("events of a malformed user: %d %s", r.status, r.raw)
			}
			s, _ := e.openEvents(t, "wr", "u1")
			if s == nil {
				t.Fatal("first stream refused")
			}
			s.until(t, "waiting")
			_, r := e.openEvents(t, "wr", "u1")
			if r.status != http.StatusServiceUnavailable || r.code() != "overloaded" || r.header.Get("Retry-After") == "" {
				t.Fatalf("stream past the limit: %d %s", r.status, r.raw)
			}
			if r := e.standing(t, "wr", "u1"); r.status != http.StatusOK || r.body["status"] != "waiting" || r.body["poll_after_ms"] == nil {
				t.Fatalf("JSON form while the streams are taken: %d %s", r.status, r.raw)
			}
			if r := e.do(t, "POST", "/v1/promotions/wr/close", ``, "Authorization", "Bearer "+token); r.status != http.StatusOK {
				t.Fatalf("close: %d %s", r.status, r.raw)
			}
			// Closing reaches the open stream at the latest on the
			// fallback re-read; then it ends.
			s.until(t, "ended")
			s.ended(t)
		})
	}
}

// TestQueueEventsHeartbeat: an idle stream gets a comment line every half
// StreamIdleTimeout, each moving the connection's deadlines ahead, so it
// outlives the timeout many times over.
func TestQueueEventsHeartbeat(t *testing.T) {
	t.Parallel()
	b := backends[0]
	idle := 2 * time.Second
	e := watched(t, b, func(cfg *httpapi.Config) { cfg.StreamIdleTimeout = idle })
	e.roomed(t, "wr", 5)
	e.join(t, "wr", "u1")
	s, r := e.openEvents(t, "wr", "u1")
	if s == nil {
		t.Fatalf("stream: %d %s", r.status, r.raw)
	}
	s.until(t, "waiting")
	began, beats := time.Now(), 0
	for time.Since(began) < 2*idle {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream cut after %s and %d heartbeats: %v", time.Since(began), beats, err)
		}
		if line == ": keep-alive\n" {
			beats++
		}
	}
	if beats < 2 {
		t.Fatalf("%d heartbeats in %s", beats, time.Since(began))
	}
}

// plainWriter hides the connection of the writer underneath: it flushes,
// but cannot be taken over (as over HTTP/2).
type plainWriter struct{ http.ResponseWriter }

func (w plainWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// TestQueueEventsClientLeaves: a stream whose client hangs up ends on the
// server, whether its connection was taken over from net/http (noticed at
// the next keep-alive) or the handler follows it (HTTP/2: noticed at once),
// and gives its slot back.
func TestQueueEventsClientLeaves(t *testing.T) {
	t.Parallel()
	for _, detached := range []bool{true, false} {
		t.Run(map[bool]string{true: "detached", false: "in the handler"}[detached], func(t *testing.T) {
			t.Parallel()
			e := watched(t, backends[0], func(cfg *httpapi.Config) {
				cfg.StreamIdleTimeout = 2 * time.Second
				cfg.MaxStreams = 1
			})
			if !detached {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					e.api.ServeHTTP(plainWriter{w}, r)
				}))
				t.Cleanup(srv.Close)
				inner := *e
				inner.url = srv.URL
				e = &inner
			}
			e.roomed(t, "wr", 5)
			e.join(t, "wr", "u1")
			for round := range 2 { // the slot comes back: a second stream opens
				s, r := e.openEvents(t, "wr", "u1")
				if s == nil {
					t.Fatalf("stream %d: %d %s", round, r.status, r.raw)
				}
				if s.res.Close != detached { // Connection: close
					t.Fatalf("connection closes after the answer: %v", s.res.Close)
				}
				s.until(t, "waiting")
				s.res.Body.Close()
				wait.For(t, 10*time.Second, "the stream's end on the server", func() bool {
					return strings.Contains(e.do(t, "GET", "/metrics", "").raw, "dibs_waitroom_sse_streams 0")
				})
			}
		})
	}
}
