package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/dibsio/dibs/internal/benchcpu"
)

// loadResult is what one load run measured; per-claim figures divide by the
// accepted claims (by the rejections with -sold-out).
type loadResult struct {
	Label           string           `json:"label,omitempty"`
	Role            string           `json:"role,omitempty"`
	Target          string           `json:"target"`
	Mode            string           `json:"mode"` // "closed" or "open"
	TargetRate      float64          `json:"target_rate,omitempty"`
	Connections     int              `json:"connections"`
	Segments        int              `json:"segments,omitempty"`
	Accepted        int64            `json:"accepted"`
	Refused         int64            `json:"refused"`
	Failed          int64            `json:"failed,omitempty"`
	Unsent          int64            `json:"unsent,omitempty"`
	Late            int64            `json:"late,omitempty"`
	Seconds         float64          `json:"seconds"`
	ClaimsPerSecond float64          `json:"claims_per_second"`
	ServerCPUus     float64          `json:"server_cpu_us_per_claim"`
	LoadCPUus       float64          `json:"load_cpu_us_per_claim"`
	RedisCPUus      float64          `json:"redis_cpu_us_per_claim,omitempty"`
	RedisNodesCPUus []float64        `json:"redis_node_cpu_us_per_claim,omitempty"`
	RedisCommands   float64          `json:"redis_commands_per_claim,omitempty"`
	Commands        map[string]int64 `json:"redis_commands,omitempty"`
	MemoryBytes     float64          `json:"redis_memory_bytes_per_claim,omitempty"`
	DBCPUus         float64          `json:"db_cpu_us_per_claim,omitempty"`
	IssuedAfterMs   float64          `json:"issued_after_ms,omitempty"`
	Issued          int64            `json:"issued,omitempty"`
	IssueTimedOut   bool             `json:"issue_timed_out,omitempty"`
	Slowlog         map[string]int64 `json:"slowlog"` // null when not counted, {} when counted and none
	SlowlogMaxUs    int64            `json:"slowlog_max_us,omitempty"`
	P50ms           float64          `json:"p50_ms"`
	P90ms           float64          `json:"p90_ms"`
	P99ms           float64          `json:"p99_ms"`
	P999ms          float64          `json:"p999_ms"`
	MaxMs           float64          `json:"max_ms"`
	Stall           *stallFigures    `json:"stall,omitempty"` // with -stall-db or -watch
}

type loadConfig struct {
	target, redis, token, prefix string
	dbComm, label, role          string
	stallDB, watchFile           string
	stallAt, stallFor, watch     time.Duration
	pid, n, c, segments          int
	rate                         float64
	duration, issueTimeout       time.Duration
	slowlog                      time.Duration
	soldOut, memory              bool
}

func load(args []string) error {
	var cfg loadConfig
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.StringVar(&cfg.target, "target", "", "base URL of the server")
	fs.IntVar(&cfg.pid, "pid", 0, "process id of the server, whose CPU time is measured")
	fs.StringVar(&cfg.redis, "redis", "", "host:port of the server's Redis, or host:port,host:port,... for every master of a Cluster (empty: Redis is not measured)")
	fs.StringVar(&cfg.token, "admin-token", "", "admin token of a dibs server: create a promotion and wait for issuance (empty: a floor server)")
	fs.StringVar(&cfg.prefix, "prefix", "dibs:", "key prefix of the dibs server")
	fs.StringVar(&cfg.dbComm, "db-comm", "", "command name of the database server's processes, whose CPU time is measured too (postgres, say; empty: not measured)")
	fs.IntVar(&cfg.n, "n", 50000, "claims to post, one per new user (ignored when -duration is given)")
	fs.IntVar(&cfg.c, "c", 64, "claims in flight: the connections of a closed-loop run, the pool of senders of an open-loop run")
	fs.Float64Var(&cfg.rate, "rate", 0, "open loop: claims due per second, each timed from when it was due (0: closed loop, as fast as answered)")
	fs.DurationVar(&cfg.duration, "duration", 0, "run this long: an open-loop run posts rate × duration claims, a closed-loop one posts until the time is up (0: -n claims)")
	fs.IntVar(&cfg.segments, "segments", 0, "with -admin-token: the promotion's segments (0: the server's default)")
	fs.BoolVar(&cfg.soldOut, "sold-out", false, "with -admin-token: claim a promotion whose only unit is taken, and count per rejection")
	fs.BoolVar(&cfg.memory, "memory", true, "with -admin-token and one Redis: wait for the stream's trim and report Redis memory per claim")
	fs.DurationVar(&cfg.issueTimeout, "issue-timeout", 5*time.Minute, "with -admin-token: how long to wait for every accepted claim to be issued; past it the run is reported as it stands")
	fs.DurationVar(&cfg.slowlog, "slowlog", 0, "count the Redis SLOWLOG entries slower than this during the run, per command (0: not counted); sets slowlog-log-slower-than")
	fs.StringVar(&cfg.label, "label", "", "label of the run, copied into the result")
	fs.StringVar(&cfg.role, "role", "", "role of the run in a table (claimcost table), copied into the result")
	fs.StringVar(&cfg.stallDB, "stall-db", "", "hold the server's database from outside it, as dibs serve --db names it: sqlite://PATH takes the file's write lock (BEGIN IMMEDIATE), postgres://… locks the issued table (empty: no stall)")
	fs.DurationVar(&cfg.stallAt, "stall-at", 25*time.Second, "with -stall-db: when the stall begins, from the first claim")
	fs.DurationVar(&cfg.stallFor, "stall-for", 10*time.Second, "with -stall-db: how long the database is held")
	fs.DurationVar(&cfg.watch, "watch", 0, "sample the server's /metrics this often: the journal's drops and peaks, the backlog's peak (0: not sampled; 1s with -stall-db)")
	fs.StringVar(&cfg.watchFile, "watch-file", "", "with -watch or -stall-db: write every sample to this file, one line each: seconds, journal claims, journal bytes, backlog, journal drops")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkStall(&cfg); err != nil {
		return err
	}
	if cfg.duration > 0 {
		cfg.n = 1_000_000_000
		if cfg.rate > 0 {
			cfg.n = max(1, int(cfg.rate*cfg.duration.Seconds()))
		}
	}
	if cfg.target == "" || cfg.pid <= 0 || cfg.n <= 0 || cfg.c <= 0 {
		return errors.New("load needs -target, -pid, -n > 0 and -c > 0")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	res, err := run(ctx, cfg)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// checkStall checks the stall's flags: a stall within the run, with
// issuance waited for, and sampled.
func checkStall(cfg *loadConfig) error {
	if cfg.stallDB == "" {
		return nil
	}
	switch {
	case cfg.token == "" || cfg.soldOut:
		return errors.New("-stall-db needs -admin-token, and claims that are accepted (no -sold-out)")
	case cfg.stallAt < 0 || cfg.stallFor <= 0:
		return errors.New("-stall-at must not be negative and -stall-for must be positive")
	case cfg.duration > 0 && cfg.stallAt+cfg.stallFor > cfg.duration:
		return fmt.Errorf("the stall (-stall-at %v, -stall-for %v) must end within -duration %v", cfg.stallAt, cfg.stallFor, cfg.duration)
	}
	if cfg.watch <= 0 {
		cfg.watch = time.Second
	}
	return nil
}

// newHTTPClient keeps one connection per claim in flight, and no more.
func newHTTPClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		MaxConnsPerHost:     conns + 16,
		IdleConnTimeout:     time.Minute,
	}}
}

// createPromotion creates the run's promotion and, with -sold-out, takes
// its only unit.
func createPromotion(ctx context.Context, hc *http.Client, cfg loadConfig, id string) error {
	stock := min(2*cfg.n, 1_000_000_000)
	if cfg.soldOut {
		stock = 1
	}
	body := fmt.Sprintf(`{"id":%q,"stock":%d,"per_user_limit":1`, id, stock)
	if cfg.segments > 0 {
		body += fmt.Sprintf(`,"segments":%d`, cfg.segments)
	}
	body += "}"
	if code, raw, err := post(ctx, hc, cfg.target+"/v1/promotions", body, cfg.token); err != nil || code != http.StatusCreated {
		return fmt.Errorf("create promotion: %d %s %v", code, raw, err)
	}
	if cfg.soldOut {
		url := cfg.target + "/v1/promotions/" + id + "/claims"
		if code, raw, err := post(ctx, hc, url, `{"user_id":"first"}`, ""); err != nil || code != http.StatusAccepted {
			return fmt.Errorf("take the only unit: %d %s %v", code, raw, err)
		}
	}
	return nil
}

// run measures one load run: the claims fired at the server, the wait for
// their issuance, and the figures per claim from the readings around them.
func run(ctx context.Context, cfg loadConfig) (loadResult, error) {
	res := loadResult{Target: cfg.target, Label: cfg.label, Role: cfg.role, Connections: cfg.c, Segments: cfg.segments}
	hc := newHTTPClient(cfg.c)
	defer hc.CloseIdleConnections()
	probe, err := newRedisProbe(cfg.redis)
	if err != nil {
		return res, err
	}
	defer probe.close()
	id := "cost" + strconv.FormatInt(time.Now().UnixNano(), 36)
	before, err := setUp(ctx, hc, probe, cfg, id)
	if err != nil {
		return res, err
	}
	f, w, err := fireWatched(ctx, hc, cfg, cfg.target+"/v1/promotions/"+id+"/claims")
	if err != nil {
		return res, err
	}
	res.LoadCPUus = float64((benchcpu.Process(os.Getpid()) - before.load).Microseconds())
	counted, err := res.tally(cfg, f)
	if err != nil {
		return res, err
	}
	if err := res.awaitIssued(ctx, hc, cfg, id); err != nil {
		return res, err
	}
	if w != nil {
		if res.Stall, err = w.finish(ctx, cfg.target); err != nil {
			return res, err
		}
	}
	err = res.measure(ctx, cfg, probe, before, f, float64(counted), id)
	return res, err
}

// marks are the readings taken before the claims, the figures' start.
type marks struct {
	redis            redisReading
	server, load, db time.Duration // CPU times
}

// setUp creates the run's promotion (with -admin-token), resets the
// slowlog (with -slowlog) and takes the readings before the claims.
func setUp(ctx context.Context, hc *http.Client, probe *redisProbe, cfg loadConfig, id string) (marks, error) {
	var m marks
	if cfg.token != "" {
		if err := createPromotion(ctx, hc, cfg, id); err != nil {
			return m, err
		}
	}
	if cfg.slowlog > 0 {
		if err := probe.resetSlowlog(ctx, cfg.slowlog); err != nil {
			return m, err
		}
	}
	m.redis = probe.read(ctx)
	m.server, m.load = benchcpu.Process(cfg.pid), benchcpu.Process(os.Getpid())
	if cfg.dbComm != "" {
		m.db = benchcpu.Named(cfg.dbComm)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(cfg.pid) + "/stat"); err != nil {
		return m, fmt.Errorf("cannot read the CPU time of process %d: %w", cfg.pid, err)
	}
	return m, nil
}

// fireWatched fires the claims at url with the server's metrics sampled
// when asked (-watch): the watch comes back running, to be finished once
// issuance was waited for; on an error it is finished already.
func fireWatched(ctx context.Context, hc *http.Client, cfg loadConfig, url string) (fired, *watch, error) {
	var w *watch
	if cfg.watch > 0 {
		var err error
		if w, err = startWatch(ctx, cfg, time.Now()); err != nil {
			return fired{}, nil, err
		}
	}
	f, err := fire(ctx, hc, cfg, url)
	if err != nil {
		if w != nil {
			_, _ = w.finish(ctx, cfg.target)
		}
		return f, nil, err
	}
	return f, w, nil
}

// tally copies the claims' outcomes into res and returns the claims the
// per-claim figures divide by: the accepted ones, the rejections with
// -sold-out; an error when there are none.
func (res *loadResult) tally(cfg loadConfig, f fired) (int64, error) {
	res.Mode, res.TargetRate = f.mode, cfg.rate
	res.Accepted, res.Refused, res.Failed, res.Unsent, res.Late = f.accepted, f.refused, f.failed, f.unsent, f.late
	counted := res.Accepted
	if cfg.soldOut {
		counted = res.Refused // per-claim figures are per rejection
		if res.Accepted > 0 {
			return 0, fmt.Errorf("%d claims accepted on a sold-out promotion", res.Accepted)
		}
	}
	if counted == 0 {
		return 0, fmt.Errorf("no claim was accepted (%d refused, %d failed: %v)", res.Refused, res.Failed, f.err)
	}
	return counted, nil
}

// awaitIssued waits for the accepted claims to be issued, on a dibs server
// (-admin-token) whose claims are accepted (no -sold-out).
func (res *loadResult) awaitIssued(ctx context.Context, hc *http.Client, cfg loadConfig, id string) error {
	if cfg.token == "" || cfg.soldOut {
		return nil
	}
	w := waitIssued(ctx, hc, cfg.target, id, res.Accepted, cfg.issueTimeout)
	if w.err != nil {
		return w.err
	}
	res.IssuedAfterMs = float64(w.after.Microseconds()) / 1000
	res.Issued, res.IssueTimedOut = w.issued, w.timedOut
	return nil
}

// measure takes the readings after the run and sets the figures, per
// claim of n, from those before.
func (res *loadResult) measure(ctx context.Context, cfg loadConfig, probe *redisProbe, before marks, f fired, n float64, id string) error {
	self1 := benchcpu.Process(cfg.pid)
	after := probe.read(ctx)
	if cfg.dbComm != "" {
		res.DBCPUus = float64((benchcpu.Named(cfg.dbComm) - before.db).Microseconds()) / n
	}
	res.Seconds = f.elapsed.Seconds()
	res.ClaimsPerSecond = n / f.elapsed.Seconds()
	res.ServerCPUus = float64((self1 - before.server).Microseconds()) / n
	res.LoadCPUus /= n
	res.setLatency(f.hist)
	probe.fill(res, before.redis, after, n)
	if cfg.slowlog > 0 {
		var err error
		res.Slowlog, res.SlowlogMaxUs, err = probe.slowlog(ctx)
		if err != nil {
			return err
		}
	}
	if cfg.memory && len(probe.nodes) == 1 && cfg.token != "" && !cfg.soldOut {
		res.MemoryBytes = float64(probe.memoryOnceTrimmed(ctx, cfg.prefix+"{"+id+"}:claims")-before.redis.memory) / n
	}
	return nil
}

// setLatency sets the latency percentiles from hist (µs).
func (res *loadResult) setLatency(hist *hdrhistogram.Histogram) {
	q := func(p float64) float64 { return float64(hist.ValueAtQuantile(p)) / 1000 }
	res.P50ms, res.P90ms, res.P99ms, res.P999ms = q(50), q(90), q(99), q(99.9)
	res.MaxMs = float64(hist.Max()) / 1000
}

// issuedWait is how the wait for issuance ended.
type issuedWait struct {
	after    time.Duration
	issued   int64
	timedOut bool
	err      error
}

// waitIssued polls the promotion until every accepted claim is issued, or
// until timeout, and says how long that took.
func waitIssued(ctx context.Context, hc *http.Client, target, id string, accepted int64, timeout time.Duration) issuedWait {
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target+"/v1/promotions/"+id, nil)
		if err != nil {
			return issuedWait{err: err}
		}
		resp, err := hc.Do(req)
		if err != nil {
			return issuedWait{err: err}
		}
		var p struct {
			Counts struct {
				Accepted, Issued, Pending, Failed int64
			} `json:"counts"`
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil {
			return issuedWait{err: fmt.Errorf("read promotion: %w", err)}
		}
		if p.Counts.Issued >= accepted && p.Counts.Pending == 0 {
			return issuedWait{after: time.Since(start), issued: p.Counts.Issued}
		}
		if p.Counts.Failed > 0 {
			return issuedWait{err: fmt.Errorf("%d claims failed", p.Counts.Failed)}
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "claimcost: after %v %d of %d claims issued\n", timeout, p.Counts.Issued, accepted)
			return issuedWait{after: time.Since(start), issued: p.Counts.Issued, timedOut: true}
		}
		// Each look counts the promotion's rows in the database, work
		// of the server's that is the measurement's, not the claims':
		// looking every 100 ms keeps it small.
		time.Sleep(100 * time.Millisecond)
	}
}

// post sends body to url (with the admin token if not empty) and returns the
// status and the answer.
func post(ctx context.Context, hc *http.Client, url, body, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = io.Copy(&buf, io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, buf.Bytes(), err
}
