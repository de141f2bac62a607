package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
	"github.com/dibsio/dibs/waitroom"
)

// benchIdle is how long BenchmarkSSEStreams watches its streams idle for
// their CPU cost: twelve fallback re-reads, and two rounds of check-ins at
// the default abandonment time (120 s; a check-in every tenth of it).
const benchIdle = 12 * waitroom.DefaultWatchRefresh

// watchServer is the API as `dibs serve` assembles it on the embedded
// default (single-node Redis, SQLite) with a waiting-room Watcher at its
// defaults and room for streams server-sent event streams.
func watchServer(b *testing.B, streams int) (url string, client rueidis.Client, rooms *waitroom.Rooms) {
	b.Helper()
	ctx := context.Background()
	client = redistest.Client(b)
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "dibs.db"))
	if err != nil {
		b.Fatalf("open store: %v", err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatalf("migrate: %v", err)
	}
	quiet := slog.New(slog.DiscardHandler)
	prefix := redistest.Prefix(b)
	rooms, err = waitroom.New(client, waitroom.Config{Prefix: prefix, Keys: testRoomKeys, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	sc := stream.DefaultConfig()
	sc.Logger = quiet
	mgr, err := promotion.New(client, st, promotion.Config{Rooms: rooms, Prefix: prefix, Stream: sc, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		b.Fatal(err)
	}
	w := waitroom.NewWatcher(rooms, waitroom.WatcherConfig{Logger: quiet})
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{Manager: mgr, AdminToken: token, Redis: client, KeyPrefix: prefix,
		Logger: quiet, Watcher: w, MaxStreams: streams})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(api)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = w.Stop(ctx) // ends the streams still open
		srv.Close()
		if err := mgr.Stop(ctx); err != nil {
			b.Errorf("stop manager: %v", err)
		}
	})
	return srv.URL, client, rooms
}

// benchRoom creates promotion id with a waiting room that lets nobody in
// during the benchmark (no scheduler runs) and joins users u0..u(n-1).
func benchRoom(b *testing.B, hc *http.Client, url string, rooms *waitroom.Rooms, id string, n int) {
	b.Helper()
	start := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	adminPost(b, hc, url+"/v1/promotions", fmt.Sprintf(`{"id":%q,"stock":1000000,"starts_at":%q,`+
		`"waiting_room":{"enabled":true,"admit_per_second":1}}`, id, start), http.StatusCreated)
	for u := range n {
		if _, err := rooms.Join(context.Background(), id, "u"+strconv.Itoa(u)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSSEStreams holds n server-sent event streams of waiting users
// open on one instance and measures the server alone (the clients run in
// a child process, TestSSEClients): the heap, stack and goroutines per open
// stream, the CPU per stream and second while they idle, of this process
// and of Redis, and Redis's commands per stream and second; and, as the
// time of an operation, how long one hint takes to reach all n streams:
// the promotion is closed, the room's hint published, and the clock stops
// once every client has read its `ended` event.
func BenchmarkSSEStreams(b *testing.B) {
	for _, n := range []int{100, 1000, 5000, 10000} {
		b.Run("streams="+strconv.Itoa(n), func(b *testing.B) { benchStreams(b, n) })
	}
}

func benchStreams(b *testing.B, n int) {
	url, client, rooms := watchServer(b, n)
	hc := &http.Client{}
	b.Cleanup(hc.CloseIdleConnections)
	ctx := context.Background()
	b.StopTimer()
	for i := range b.N {
		id := "sse" + strconv.Itoa(i)
		benchRoom(b, hc, url, rooms, id, n)
		var mem0 runtime.MemStats
		settle()
		runtime.ReadMemStats(&mem0)
		g0 := runtime.NumGoroutine()

		clients := startClients(b, url+"/v1/promotions/"+id+"/queue/", n)
		clients.await(b, "ready")
		if i == 0 {
			var mem1 runtime.MemStats
			settle()
			runtime.ReadMemStats(&mem1)
			b.ReportMetric(float64(int64(mem1.HeapInuse)-int64(mem0.HeapInuse))/float64(n), "heap-B/stream")
			b.ReportMetric(float64(int64(mem1.StackInuse)-int64(mem0.StackInuse))/float64(n), "stack-B/stream")
			b.ReportMetric(float64(runtime.NumGoroutine()-g0)/float64(n), "goroutines/stream")
			s0 := redisNow(b, client)
			time.Sleep(benchIdle) // measuring the idle streams: nothing to wait for
			s1 := redisNow(b, client)
			per := func(x float64) float64 { return x / float64(n) / benchIdle.Seconds() }
			b.ReportMetric(per(float64((s1.self - s0.self).Microseconds())), "idle-cpu-µs/stream/s")
			b.ReportMetric(per(float64((s1.cpu - s0.cpu).Microseconds())), "idle-redis-µs/stream/s")
			b.ReportMetric(per(float64(s1.commands-s0.commands)), "idle-redis-cmds/stream/s")
		}
		adminPost(b, hc, url+"/v1/promotions/"+id+"/close", "", http.StatusOK)
		b.StartTimer()
		ch := rooms.Keys(id).Events()
		if err := client.Do(ctx, client.B().Spublish().Channel(ch).Message("ended").Build()).Error(); err != nil {
			b.Fatal(err)
		}
		clients.await(b, "done")
		b.StopTimer()
		clients.wait(b)
	}
}

// settle collects garbage twice, so that what sync.Pools hold is gone too.
func settle() {
	runtime.GC()
	runtime.GC()
}

// sseClients is a child process that holds event streams (TestSSEClients).
type sseClients struct {
	cmd   *exec.Cmd
	stdin io.Closer
	lines *bufio.Scanner
}

// startClients runs the test binary as a child that opens n streams of the
// users u0..u(n-1) at prefix.
func startClients(b *testing.B, prefix string, n int) *sseClients {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSSEClients$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DIBS_SSE_CLIENTS="+strconv.Itoa(n)+" "+prefix)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &sseClients{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(out)}
	b.Cleanup(func() { c.stdin.Close(); _ = c.cmd.Wait() })
	return c
}

// await reads the child's output until the line want.
func (c *sseClients) await(b *testing.B, want string) {
	b.Helper()
	for c.lines.Scan() {
		if line := c.lines.Text(); line == "sse-clients: "+want {
			return
		} else if strings.HasPrefix(line, "sse-clients: ") {
			b.Fatal(line)
		}
	}
	b.Fatalf("clients ended before %q: %v", want, c.lines.Err())
}

// wait lets the child end and waits for it.
func (c *sseClients) wait(b *testing.B) {
	b.Helper()
	c.stdin.Close()
	for c.lines.Scan() {
	}
	if err := c.cmd.Wait(); err != nil {
		b.Fatalf("clients: %v", err)
	}
}

// TestSSEClients is the client side of BenchmarkSSEStreams, run in a child
// process: with DIBS_SSE_CLIENTS="<n> <url prefix>" it opens n streams,
// prints "sse-clients: ready" once each read its first `waiting` event and
// "sse-clients: done" once each ended, then waits for its standard input
// to close. Without the variable it is skipped.
func TestSSEClients(t *testing.T) {
	spec := os.Getenv("DIBS_SSE_CLIENTS")
	if spec == "" {
		t.Skip("the client side of BenchmarkSSEStreams")
	}
	ns, prefix, _ := strings.Cut(spec, " ")
	n, err := strconv.Atoi(ns)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer hc.CloseIdleConnections()
	var ready, ended atomic.Int64
	var wg sync.WaitGroup
	say := func(s string) { fmt.Println("sse-clients: " + s) }
	for u := range n {
		wg.Go(func() {
			first := true
			err := readEvents(hc, prefix+"u"+strconv.Itoa(u), func(status string) bool {
				if first {
					first = false
					if ready.Add(1) == int64(n) {
						say("ready")
					}
				}
				return status == "waiting"
			})
			if err != nil {
				say("stream: " + err.Error())
			}
			if ended.Add(1) == int64(n) {
				say("done")
			}
		})
	}
	wg.Wait()
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// BenchmarkQueueLookups answers GET …/queue/{user_id} (the JSON form) for
// 1,000 waiting users, 32 requests in flight, each user asked once before
// the clock starts: lookups per second, and Redis's commands and CPU per
// lookup (the watcher's re-reads and check-ins included).
func BenchmarkQueueLookups(b *testing.B) {
	const users, inFlight = 1000, 32
	url, client, rooms := watchServer(b, 64)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: inFlight}}
	b.Cleanup(hc.CloseIdleConnections)
	benchRoom(b, hc, url, rooms, "look", users)
	get := func(u int) {
		res, err := hc.Get(url + "/v1/promotions/look/queue/u" + strconv.Itoa(u%users))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("lookup: %d", res.StatusCode)
		}
	}
	for u := range users {
		get(u)
	}
	s0 := redisNow(b, client)
	t0 := time.Now()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			for u := next.Add(1); u <= int64(b.N); u = next.Add(1) {
				get(int(u))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	took := time.Since(t0)
	s1 := redisNow(b, client)
	b.ReportMetric(float64(b.N)/took.Seconds(), "lookups/s")
	b.ReportMetric(float64(s1.commands-s0.commands)/float64(b.N), "redis-cmds/lookup")
	b.ReportMetric(float64((s1.cpu-s0.cpu).Microseconds())/float64(b.N), "redis-µs/lookup")
}

// readEvents reads the status events of one stream, calling each with the
// status until it returns false or the stream ends.
func readEvents(hc *http.Client, url string, each func(status string) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(res.Body)
		return fmt.Errorf("stream: %d %s", res.StatusCode, raw)
	}
	r := bufio.NewReader(res.Body)
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			_, rest, _ := strings.Cut(data, `"status":"`)
			status, _, _ := strings.Cut(rest, `"`)
			if !each(status) {
				return nil
			}
		}
	}
}

// adminPost posts body to url with the admin token and fails unless the
// answer has status want.
func adminPost(b *testing.B, hc *http.Client, url, body string, want int) {
	b.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != want {
		b.Fatalf("POST %s: %d %s", url, res.StatusCode, raw)
	}
}

// sample is the CPU time used so far by this process and by the Redis of
// a client, and the commands that Redis processed.
type sample struct {
	self, cpu time.Duration
	commands  int64
}

// redisNow samples this process's CPU and Redis's CPU and command count
// (INFO: used_cpu_sys + used_cpu_user, total_commands_processed).
func redisNow(b *testing.B, client rueidis.Client) (s sample) {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	info, err := client.Do(context.Background(), client.B().Info().Section("all").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "used_cpu_sys", "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += time.Duration(f * float64(time.Second))
		case "total_commands_processed":
			s.commands, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return s
}
