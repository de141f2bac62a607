package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/httpapi/ui"
	"github.com/dibsio/dibs/internal/benchcpu"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/stream"
)

// benchInFlight is how many claims BenchmarkHTTPClaim keeps in flight, as
// many as `dibs bench --concurrency 64`.
const benchInFlight = 64

// benchServer is the service as `dibs serve` assembles it on the embedded
// default (single-node Redis, SQLite), with the production stream defaults
// rather than the short test timings of setup: the issuer confirms claims
// into SQLite while the benchmark runs, as it would in production, and the
// hooks a claim or an issued batch calls feed the confirmation path's
// metrics and the dashboard's tally, as dibs serve plugs them.
func benchServer(b *testing.B) (string, rueidis.Client) {
	b.Helper()
	ctx := context.Background()
	client := redistest.Client(b)
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "dibs.db"))
	if err != nil {
		b.Fatalf("open store: %v", err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatalf("migrate: %v", err)
	}
	reg := prometheus.NewRegistry()
	pm := promotion.NewMetrics(reg, redistest.Prefix(b))
	tally := new(ui.Tally)
	sc := stream.DefaultConfig()
	sc.Logger = slog.New(slog.DiscardHandler)
	sc.Hooks = pm.StreamHooks()
	mgr, err := promotion.New(client, st, promotion.Config{
		Prefix: redistest.Prefix(b),
		Stream: sc,
		Logger: slog.New(slog.DiscardHandler),
		OnIssued: func(id string, n int) {
			pm.Issued(id, n)
			tally.Issued(id, n)
		},
		// The hooks a claim or an issued batch calls; the others are
		// the re-check's.
		OnRemaining: pm.Remaining,
		OnHandling:  pm.Handling,
		OnBacklog:   pm.Backlog,
		OnDrained:   pm.Drained,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		b.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{Manager: mgr, AdminToken: token, Redis: client, KeyPrefix: redistest.Prefix(b),
		Logger: slog.New(slog.DiscardHandler), Metrics: httpapi.NewMetrics(reg), Gatherer: reg, Tally: tally})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(api)
	b.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := mgr.Stop(ctx); err != nil {
			b.Errorf("stop manager: %v", err)
		}
	})
	return srv.URL, client
}

// BenchmarkHTTPClaim measures POST /v1/promotions/{id}/claims end to end
// over loopback HTTP/1.1 with keep-alive: decoding, validation, the claim
// script, the JSON answer, metrics. Every request is for a new user against
// a huge stock, so each one is accepted (202) and enqueued for the issuer.
// The client runs in the same process and shares the CPUs with the server.
func BenchmarkHTTPClaim(b *testing.B) {
	url, client := benchServer(b)
	hc := benchClient(b)
	adminPost(b, hc, url+"/v1/promotions", `{"id":"bench","stock":1000000000,"per_user_limit":1}`, http.StatusCreated)
	benchPosts(b, hc, url+"/v1/promotions/bench/claims", client)
}

// BenchmarkHTTPFloor is BenchmarkHTTPClaim's client against a handler that
// only reads the body and writes a claim-shaped 202: what loopback HTTP/1.1
// costs on this machine before dibs does any work. It is the ceiling of
// BenchmarkHTTPClaim here, as redis-benchmark is the ceiling of the script.
func BenchmarkHTTPFloor(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"status":"pending","claim_id":"bench#1","rank":1}`+"\n")
	}))
	b.Cleanup(srv.Close)
	benchPosts(b, benchClient(b), srv.URL+"/v1/promotions/bench/claims", nil)
}

// benchClient is a keep-alive client with a connection per request in flight.
func benchClient(b *testing.B) *http.Client {
	hc := &http.Client{Transport: &http.Transport{
		MaxIdleConns:        benchInFlight,
		MaxIdleConnsPerHost: benchInFlight,
		IdleConnTimeout:     time.Minute,
	}}
	b.Cleanup(hc.CloseIdleConnections)
	return hc
}

// benchPosts posts b.N claims for new users to url, benchInFlight at a time,
// fails on any answer but 202, and reports claims/s and the CPU per claim
// (of Redis too when redis is the server's client).
func benchPosts(b *testing.B, hc *http.Client, url string, redis rueidis.Client) {
	var users, accepted atomic.Int64
	b.SetParallelism(max(1, benchInFlight/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchcpu.Start(redis)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := `{"user_id":"u` + strconv.FormatInt(users.Add(1), 10) + `"}`
			req, err := http.NewRequest("POST", url, strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			req.Header.Set("Content-Type", "application/json")
			res, err := hc.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			// Drain the body so the connection goes back to the pool.
			raw, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusAccepted {
				b.Errorf("claim: %d %s %v", res.StatusCode, raw, err)
				return
			}
			accepted.Add(1)
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(accepted.Load())/elapsed.Seconds(), "claims/s")
	cpu.Report(b, accepted.Load())
}
