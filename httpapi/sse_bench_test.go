package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/internal/redistest"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
	"github.com/dibsio/dibs/waitroom"
)

// benchIdle is how long BenchmarkSSEStreams watches its streams idle for
// their CPU cost: two fallback re-reads.
const benchIdle = 2 * waitroom.DefaultWatchRefresh

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

// BenchmarkSSEStreams holds n server-sent event streams of waiting users
// open on one instance and measures, with client and server in one process:
// the heap and goroutines per open stream, the CPU per stream and second
// while they idle (the watcher re-reads every standing every 2 s, checking
// its user in), and, as the time of an operation, how long one hint takes
// to reach all n streams: the promotion is closed, the room's hint
// published, and the clock stops once every client has read its `ended`
// event.
func BenchmarkSSEStreams(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run("streams="+strconv.Itoa(n), func(b *testing.B) { benchStreams(b, n) })
	}
}

func benchStreams(b *testing.B, n int) {
	url, client, rooms := watchServer(b, n)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	b.Cleanup(hc.CloseIdleConnections)
	ctx := context.Background()
	b.StopTimer()
	for i := range b.N {
		id := "sse" + strconv.Itoa(i)
		start := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		adminPost(b, hc, url+"/v1/promotions", fmt.Sprintf(`{"id":%q,"stock":1000000,"starts_at":%q,"waiting_room":{"enabled":true,"admit_per_second":1}}`, id, start), http.StatusCreated)
		for u := range n {
			if _, err := rooms.Join(ctx, id, "u"+strconv.Itoa(u)); err != nil {
				b.Fatal(err)
			}
		}
		var mem0 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&mem0)
		g0 := runtime.NumGoroutine()

		var ready, ended sync.WaitGroup
		ready.Add(n)
		ended.Add(n)
		for u := range n {
			go func() {
				defer ended.Done()
				first := true
				err := readEvents(hc, url+"/v1/promotions/"+id+"/queue/u"+strconv.Itoa(u), func(status string) bool {
					if first {
						first = false
						ready.Done()
					}
					return status == "waiting"
				})
				if first {
					ready.Done()
				}
				if err != nil {
					b.Error(err)
				}
			}()
		}
		ready.Wait()
		if i == 0 {
			var mem1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&mem1)
			b.ReportMetric(float64(mem1.HeapInuse-mem0.HeapInuse)/float64(n), "heap-B/stream")
			b.ReportMetric(float64(runtime.NumGoroutine()-g0)/float64(n), "goroutines/stream")
			self0, redis0 := cpuNow(b, client)
			time.Sleep(benchIdle) // measuring the idle streams: nothing to wait for
			self1, redis1 := cpuNow(b, client)
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) / benchIdle.Seconds() }
			b.ReportMetric(per(self1-self0), "idle-cpu-µs/stream/s")
			b.ReportMetric(per(redis1-redis0), "idle-redis-µs/stream/s")
		}
		adminPost(b, hc, url+"/v1/promotions/"+id+"/close", "", http.StatusOK)
		b.StartTimer()
		ch := rooms.Keys(id).Events()
		if err := client.Do(ctx, client.B().Spublish().Channel(ch).Message("ended").Build()).Error(); err != nil {
			b.Fatal(err)
		}
		ended.Wait()
		b.StopTimer()
	}
}

// readEvents reads the status events of one stream, calling each with the
// status until it returns false or the stream ends.
func readEvents(hc *http.Client, url string, each func(status string) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
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

// cpuNow is the CPU time used so far by this process and by the Redis of
// client (0 if INFO does not tell).
func cpuNow(b *testing.B, client rueidis.Client) (self, redis time.Duration) {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	info, err := client.Do(context.Background(), client.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			redis += time.Duration(f * float64(time.Second))
		}
	}
	return self, redis
}
