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
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/benchcpu"
)

// loadResult is what one load run measured; per-claim figures divide by the
// accepted claims.
type loadResult struct {
	Target          string           `json:"target"`
	Accepted        int64            `json:"accepted"`
	Refused         int64            `json:"refused"`
	Seconds         float64          `json:"seconds"`
	ClaimsPerSecond float64          `json:"claims_per_second"`
	ServerCPUus     float64          `json:"server_cpu_us_per_claim"`
	RedisCPUus      float64          `json:"redis_cpu_us_per_claim,omitempty"`
	RedisCommands   float64          `json:"redis_commands_per_claim,omitempty"`
	Commands        map[string]int64 `json:"redis_commands,omitempty"`
	MemoryBytes     float64          `json:"redis_memory_bytes_per_claim,omitempty"`
	DBCPUus         float64          `json:"db_cpu_us_per_claim,omitempty"`
	IssuedAfterMs   float64          `json:"issued_after_ms,omitempty"`
	P50ms           float64          `json:"p50_ms"`
	P99ms           float64          `json:"p99_ms"`
}

type loadConfig struct {
	target, redis, token, prefix string
	dbComm                       string
	pid, n, c                    int
	rate                         float64
	soldOut                      bool
}

func load(args []string) error {
	var cfg loadConfig
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.StringVar(&cfg.target, "target", "", "base URL of the server")
	fs.IntVar(&cfg.pid, "pid", 0, "process id of the server, whose CPU time is measured")
	fs.StringVar(&cfg.redis, "redis", "", "host:port of the server's Redis (empty: Redis is not measured)")
	fs.StringVar(&cfg.token, "admin-token", "", "admin token of a dibs server: create a promotion and wait for issuance (empty: a floor server)")
	fs.StringVar(&cfg.prefix, "prefix", "dibs:", "key prefix of the dibs server")
	fs.StringVar(&cfg.dbComm, "db-comm", "", "command name of the database server's processes, whose CPU time is measured too (postgres, say; empty: not measured)")
	fs.IntVar(&cfg.n, "n", 50000, "claims to post, one per new user")
	fs.IntVar(&cfg.c, "c", 64, "claims in flight")
	fs.Float64Var(&cfg.rate, "rate", 0, "claims per second to pace the run at (0: as fast as answered)")
	fs.BoolVar(&cfg.soldOut, "sold-out", false, "with -admin-token: claim a promotion whose only unit is taken, and count per rejection")
	if err := fs.Parse(args); err != nil {
		return err
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

// redisProbe reads Redis's CPU, memory and command counts.
type redisProbe struct{ c rueidis.Client }

func (p redisProbe) info(ctx context.Context, section string) map[string]string {
	out := map[string]string{}
	if p.c == nil {
		return out
	}
	s, err := p.c.Do(ctx, p.c.B().Info().Section(section).Build()).ToString()
	if err != nil {
		return out
	}
	for line := range strings.Lines(s) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// memory is used_memory, in bytes.
func (p redisProbe) memory(ctx context.Context) int64 {
	n, _ := strconv.ParseInt(p.info(ctx, "memory")["used_memory"], 10, 64)
	return n
}

// commands returns the calls of every command so far (INFO commandstats).
func (p redisProbe) commands(ctx context.Context) map[string]int64 {
	out := map[string]int64{}
	for k, v := range p.info(ctx, "commandstats") {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		out[name], _ = strconv.ParseInt(calls, 10, 64)
	}
	return out
}

func run(ctx context.Context, cfg loadConfig) (loadResult, error) {
	res := loadResult{Target: cfg.target}
	hc := &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        cfg.c + 16,
		MaxIdleConnsPerHost: cfg.c + 16,
		IdleConnTimeout:     time.Minute,
	}}
	defer hc.CloseIdleConnections()
	var probe redisProbe
	if cfg.redis != "" {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{cfg.redis}, DisableCache: true, ForceSingleClient: true})
		if err != nil {
			return res, err
		}
		defer c.Close()
		probe.c = c
	}
	id := "cost" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if cfg.token != "" {
		stock := 2 * cfg.n
		if cfg.soldOut {
			stock = 1
		}
		body := fmt.Sprintf(`{"id":%q,"stock":%d,"per_user_limit":1}`, id, stock)
		if code, raw, err := post(ctx, hc, cfg.target+"/v1/promotions", body, cfg.token); err != nil || code != http.StatusCreated {
			return res, fmt.Errorf("create promotion: %d %s %v", code, raw, err)
		}
		if cfg.soldOut {
			url := cfg.target + "/v1/promotions/" + id + "/claims"
			if code, raw, err := post(ctx, hc, url, `{"user_id":"first"}`, ""); err != nil || code != http.StatusAccepted {
				return res, fmt.Errorf("take the only unit: %d %s %v", code, raw, err)
			}
		}
	}
	mem0 := probe.memory(ctx)
	cmd0 := probe.commands(ctx)
	self0, redis0 := benchcpu.Process(cfg.pid), redisCPU(ctx, probe.c)
	var db0 time.Duration
	if cfg.dbComm != "" {
		db0 = benchcpu.Named(cfg.dbComm)
	}
	if self0 == 0 {
		return res, fmt.Errorf("cannot read the CPU time of process %d", cfg.pid)
	}

	hist := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	var mu sync.Mutex
	var next, accepted, refused atomic.Int64
	url := cfg.target + "/v1/promotions/" + id + "/claims"
	start := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, cfg.c)
	for range cfg.c {
		wg.Go(func() {
			local := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
			defer func() {
				mu.Lock()
				hist.Merge(local)
				mu.Unlock()
			}()
			for {
				i := next.Add(1)
				if i > int64(cfg.n) {
					return
				}
				if cfg.rate > 0 {
					due := start.Add(time.Duration(float64(i-1) / cfg.rate * float64(time.Second)))
					if d := time.Until(due); d > 0 {
						time.Sleep(d) // an open-loop pacer: each claim waits for its slot
					}
				}
				t0 := time.Now()
				code, raw, err := post(ctx, hc, url, `{"user_id":"u`+strconv.FormatInt(i, 10)+`"}`, "")
				if err != nil {
					errc <- err
					return
				}
				_ = local.RecordValue(max(time.Since(t0).Microseconds(), 1))
				if code == http.StatusAccepted {
					accepted.Add(1)
				} else {
					if refused.Add(1) == 1 && !cfg.soldOut {
						fmt.Fprintf(os.Stderr, "claimcost: claim answered %d %s\n", code, raw)
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errc:
		return res, err
	default:
	}
	res.Accepted, res.Refused = accepted.Load(), refused.Load()
	counted := res.Accepted
	if cfg.soldOut {
		counted = res.Refused // per-claim figures are per rejection
		if res.Accepted > 0 {
			return res, fmt.Errorf("%d claims accepted on a sold-out promotion", res.Accepted)
		}
	}
	if counted == 0 {
		return res, errors.New("no claim was accepted")
	}
	if cfg.token != "" && !cfg.soldOut {
		after, err := waitIssued(ctx, hc, cfg.target, id, res.Accepted)
		if err != nil {
			return res, err
		}
		res.IssuedAfterMs = float64(after.Microseconds()) / 1000
	}
	self1, redis1 := benchcpu.Process(cfg.pid), redisCPU(ctx, probe.c)
	if cfg.dbComm != "" {
		res.DBCPUus = float64((benchcpu.Named(cfg.dbComm) - db0).Microseconds()) / float64(counted)
	}
	cmd1 := probe.commands(ctx)
	n := float64(counted)
	res.Seconds = elapsed.Seconds()
	res.ClaimsPerSecond = n / elapsed.Seconds()
	res.ServerCPUus = float64((self1 - self0).Microseconds()) / n
	res.P50ms = float64(hist.ValueAtQuantile(50)) / 1000
	res.P99ms = float64(hist.ValueAtQuantile(99)) / 1000
	if probe.c != nil {
		res.RedisCPUus = float64((redis1 - redis0).Microseconds()) / n
		res.Commands = map[string]int64{}
		var total int64
		for k, v := range cmd1 {
			if d := v - cmd0[k]; d > 0 && k != "info" {
				res.Commands[k] = d
				total += d
			}
		}
		res.RedisCommands = float64(total) / n
	}
	if probe.c != nil && cfg.token != "" && !cfg.soldOut {
		// Memory once issued: wait (bounded) for the stream's housekeeping
		// to trim the acknowledged entries, then read used_memory.
		key := cfg.prefix + "{" + id + "}:claims"
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			if l, err := probe.c.Do(ctx, probe.c.B().Xlen().Key(key).Build()).AsInt64(); err != nil || l == 0 {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		res.MemoryBytes = float64(probe.memory(ctx)-mem0) / n
	}
	return res, nil
}

func redisCPU(ctx context.Context, c rueidis.Client) time.Duration {
	if c == nil {
		return 0
	}
	return benchcpu.Redis(ctx, c)
}

// waitIssued polls the promotion until every accepted claim is issued and
// returns how long that took.
func waitIssued(ctx context.Context, hc *http.Client, target, id string, accepted int64) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target+"/v1/promotions/"+id, nil)
		if err != nil {
			return 0, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		var p struct {
			Counts struct {
				Accepted, Issued, Pending, Failed int64
			} `json:"counts"`
		}
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil {
			return 0, fmt.Errorf("read promotion: %w", err)
		}
		if p.Counts.Issued >= accepted && p.Counts.Pending == 0 {
			return time.Since(start), nil
		}
		if p.Counts.Failed > 0 {
			return 0, fmt.Errorf("%d claims failed", p.Counts.Failed)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("after 5 minutes %d of %d claims issued", p.Counts.Issued, accepted)
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
