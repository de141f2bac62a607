//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/benchcpu"
)

// roomConfig is what claimcost room was asked to do.
type roomConfig struct {
	target, redis, token, jsonOut, note string
	pid, n, c, dialers, readers         int
	admit                               int
	pause                               bool
	idle, lookups, wait                 time.Duration
}

// roomCmd measures a waiting room on a running dibs serve: joins, Redis
// memory per waiting user, n idle event streams (their CPU and heap), the
// fan-out of a hint to all of them, and status lookups. It prints the rows
// of the bundle's table, and appends the figures as one JSON line to -json.
func roomCmd(args []string, stdout io.Writer) error {
	var cfg roomConfig
	fs := flag.NewFlagSet("room", flag.ContinueOnError)
	fs.StringVar(&cfg.target, "target", "", "base URL of dibs serve (an IPv4 address)")
	fs.IntVar(&cfg.pid, "pid", 0, "process id of dibs serve, whose CPU and memory are measured")
	fs.StringVar(&cfg.redis, "redis", "", "host:port of the server's Redis (one node)")
	fs.StringVar(&cfg.token, "admin-token", "", "admin token of the server")
	fs.IntVar(&cfg.n, "n", 10000, "waiting users, each joined and holding one event stream")
	fs.IntVar(&cfg.c, "c", 256, "connections of the joins and of the lookups (closed loop)")
	fs.IntVar(&cfg.dialers, "dialers", 64, "goroutines that open the streams")
	fs.IntVar(&cfg.readers, "readers", 8, "goroutines (each an epoll set) that read the streams")
	fs.IntVar(&cfg.admit, "admit-per-second", 1, "the room's admission rate")
	fs.BoolVar(&cfg.pause, "pause", true, "pause the promotion before the joins, so that the line stands still and the streams are idle (false: it moves at -admit-per-second)")
	fs.DurationVar(&cfg.idle, "idle", 24*time.Second, "how long the idle streams are measured (the watcher re-reads every 2 s and checks users in every 12 s)")
	fs.DurationVar(&cfg.lookups, "lookups", 10*time.Second, "how long the status lookups run")
	fs.DurationVar(&cfg.wait, "wait", 10*time.Second, "longest wait for a hint to reach every stream")
	fs.StringVar(&cfg.jsonOut, "json", "", "append the figures as one JSON line to this file")
	fs.StringVar(&cfg.note, "note", "", "a note printed under the rows (the core layout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.target == "" || cfg.pid <= 0 || cfg.redis == "" || cfg.token == "" || cfg.n <= 0 || cfg.c <= 0 || cfg.dialers <= 0 || cfg.readers <= 0 {
		return errors.New("room needs -target, -pid, -redis, -admin-token, and -n, -c, -dialers, -readers > 0")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	res, err := runRoom(ctx, cfg)
	if err != nil {
		return err
	}
	if cfg.jsonOut != "" {
		f, err := os.OpenFile(cfg.jsonOut, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		err = json.NewEncoder(f).Encode(res)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	writeRoom(stdout, res, cfg.note)
	return nil
}

func runRoom(ctx context.Context, cfg roomConfig) (roomResult, error) {
	res := roomResult{Users: cfg.n, Connections: cfg.c, Paused: cfg.pause}
	server, err := serverAddr(cfg.target)
	if err != nil {
		return res, err
	}
	hc := newHTTPClient(cfg.c)
	defer hc.CloseIdleConnections()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.redis}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		return res, fmt.Errorf("connect to Redis %s: %w", cfg.redis, err)
	}
	defer rc.Close()
	id := "room" + strconv.FormatInt(time.Now().UnixNano(), 36)
	base := cfg.target + "/v1/promotions/" + id
	if err := createRoom(ctx, hc, cfg, id); err != nil {
		return res, err
	}

	// Joins, and what the waiting users hold in Redis.
	r0 := redisSnapshot(ctx, rc)
	took, ok, _ := roomLoop(ctx, cfg.c, int64(cfg.n), 0, func(i int64) bool {
		code, raw, err := post(ctx, hc, base+"/queue", `{"user_id":"u`+strconv.FormatInt(i, 10)+`"}`, "")
		return firstRefusal(err, code, raw, http.StatusAccepted, "join")
	})
	r1 := redisSnapshot(ctx, rc)
	res.Joined = ok
	if ok < int64(cfg.n) {
		return res, fmt.Errorf("%d of %d joins were accepted", ok, cfg.n)
	}
	res.JoinsPerSecond = float64(ok) / took.Seconds()
	calls, _ := callsBetween(r0.calls, r1.calls)
	res.JoinRedisCommands = float64(calls) / float64(ok)
	res.RedisBytesPerUser = float64(r1.memory-r0.memory) / float64(ok)

	// The streams, idle.
	if err := idleStreams(ctx, cfg, server, id, hc, rc, &res); err != nil {
		return res, err
	}

	// Status lookups.
	r4, s4 := redisSnapshot(ctx, rc), benchcpu.Process(cfg.pid)
	took, ok, failed := roomLoop(ctx, cfg.c, 0, cfg.lookups, func(i int64) bool {
		code, raw, err := send(ctx, hc, http.MethodGet, base+"/queue/u"+strconv.FormatInt(i%int64(cfg.n), 10), "", "")
		return firstRefusal(err, code, raw, http.StatusOK, "lookup")
	})
	r5, s5 := redisSnapshot(ctx, rc), benchcpu.Process(cfg.pid)
	res.Lookups, res.LookupsFailed = ok, failed
	if ok == 0 {
		return res, errors.New("no lookup was answered 200")
	}
	calls, res.LookupCommands = callsBetween(r4.calls, r5.calls)
	res.LookupsPerSecond = float64(ok) / took.Seconds()
	res.LookupRedisCommands = float64(calls) / float64(ok)
	res.LookupRedisUs = float64((r5.cpu - r4.cpu).Microseconds()) / float64(ok)
	res.LookupServerUs = float64((s5 - s4).Microseconds()) / float64(ok)
	return res, nil
}

// idleStreams opens a stream for every user, measures them idle, then
// times the hint, and closes them.
func idleStreams(ctx context.Context, cfg roomConfig, server netip.AddrPort, id string, hc *http.Client, rc rueidis.Client, res *roomResult) error {
	m0 := serverMemory(ctx, hc, cfg.target, cfg.pid)
	message := "hint " + strconv.FormatInt(time.Now().UnixNano(), 36)
	path := func(i int) string { return "/v1/promotions/" + id + "/queue/u" + strconv.Itoa(i) }
	t0 := time.Now()
	st, err := openStreams(ctx, server, cfg.n, cfg.dialers, cfg.readers, path, []byte(`"status":"waiting"`), []byte(message))
	if st != nil {
		defer st.close()
	}
	if err != nil {
		return err
	}
	st.await(ctx, time.Minute+time.Duration(cfg.n)*time.Millisecond, func() bool {
		return st.ready.Load()+st.failed.Load()+st.ended.Load() >= int64(cfg.n)
	})
	res.OpenSeconds = time.Since(t0).Seconds()
	res.Streams, res.StreamsFailed = st.ready.Load()-st.ended.Load(), int64(cfg.n)-st.ready.Load()+st.ended.Load()
	if res.Streams <= 0 {
		return fmt.Errorf("no stream opened (%d failed, %d ended)", st.failed.Load(), st.ended.Load())
	}
	held := float64(res.Streams)

	r2, s2, t2 := redisSnapshot(ctx, rc), benchcpu.Process(cfg.pid), time.Now()
	select { // the measured window: nothing to wait for but the time
	case <-time.After(cfg.idle):
	case <-ctx.Done():
		return ctx.Err()
	}
	r3, s3 := redisSnapshot(ctx, rc), benchcpu.Process(cfg.pid)
	res.IdleSeconds = time.Since(t2).Seconds()
	per := func(x float64) float64 { return x / held / res.IdleSeconds }
	res.IdleRedisUs = per(float64((r3.cpu - r2.cpu).Microseconds()))
	calls, _ := callsBetween(r2.calls, r3.calls)
	res.IdleRedisCommands = per(float64(calls))
	res.IdleServerUs = per(float64((s3 - s2).Microseconds()))
	m1 := serverMemory(ctx, hc, cfg.target, cfg.pid)
	res.HeapBytesPerStream = (m1.heap - m0.heap) / held
	res.StackBytesPerStream = (m1.stack - m0.stack) / held
	res.RSSBytesPerStream = float64(m1.rss-m0.rss) / held

	// The hint: a new message for the room, until every open stream shows it.
	want := st.ready.Load() - st.ended.Load()
	t4 := time.Now()
	body := fmt.Sprintf(`{"waiting_room":{"message":%q}}`, message)
	if code, raw, err := send(ctx, hc, http.MethodPatch, cfg.target+"/v1/promotions/"+id, body, cfg.token); err != nil || code != http.StatusOK {
		return fmt.Errorf("set the room's message: %d %s %v", code, raw, err)
	}
	st.await(ctx, cfg.wait, func() bool { return st.hinted.Load() >= want })
	res.Hinted = st.hinted.Load()
	if res.Hinted > 0 {
		res.HintMs = float64(time.Unix(0, st.lastHint.Load()).Sub(t4).Microseconds()) / 1000
	}
	return nil
}

// createRoom creates promotion id with a waiting room, and pauses it.
func createRoom(ctx context.Context, hc *http.Client, cfg roomConfig, id string) error {
	body := fmt.Sprintf(`{"id":%q,"stock":1000000,"per_user_limit":1,"waiting_room":{"enabled":true,"admit_per_second":%d}}`, id, cfg.admit)
	if code, raw, err := post(ctx, hc, cfg.target+"/v1/promotions", body, cfg.token); err != nil || code != http.StatusCreated {
		return fmt.Errorf("create promotion: %d %s %v", code, raw, err)
	}
	if cfg.pause {
		code, raw, err := send(ctx, hc, http.MethodPatch, cfg.target+"/v1/promotions/"+id, `{"paused":true}`, cfg.token)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("pause promotion: %d %s %v", code, raw, err)
		}
	}
	return nil
}

// roomLoop runs do from c goroutines, each calling it again when it
// returns: n calls in all (n > 0), or until the time d is up. It returns
// how long that took and the calls that succeeded and failed.
func roomLoop(ctx context.Context, c int, n int64, d time.Duration, do func(i int64) bool) (time.Duration, int64, int64) {
	var next, ok, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for range c {
		wg.Go(func() {
			for i := next.Add(1) - 1; ctx.Err() == nil; i = next.Add(1) - 1 {
				if (n > 0 && i >= n) || (n == 0 && time.Now().After(end)) {
					return
				}
				if do(i) {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), ok.Load(), failed.Load()
}

// refusals counts the answers firstRefusal printed, so that only the first
// few go to standard error.
var refusals atomic.Int64

// firstRefusal says whether an answer is the status want, and prints the
// first few that are not.
func firstRefusal(err error, code int, raw []byte, want int, what string) bool {
	if err == nil && code == want {
		return true
	}
	if refusals.Add(1) <= 3 {
		fmt.Fprintf(os.Stderr, "claimcost: %s answered %d %s %v\n", what, code, strings.TrimSpace(string(raw)), err)
	}
	return false
}

// send sends a request with an optional JSON body and admin token, and
// returns the status and the answer.
func send(ctx context.Context, hc *http.Client, method, url, body, token string) (int, []byte, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, raw, err
}

// serverAddr is the IPv4 address and port of a base URL.
func serverAddr(target string) (netip.AddrPort, error) {
	u, err := url.Parse(target)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ap, err := netip.ParseAddrPort(u.Host)
	if err != nil || !ap.Addr().Is4() {
		return netip.AddrPort{}, fmt.Errorf("the target %q is not http://IPv4:PORT", target)
	}
	return ap, nil
}
