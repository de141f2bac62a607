package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/dibsio/dibs/bench/openloop"
)

// requestTimeout bounds one claim request.
const requestTimeout = 30 * time.Second

// fired is what sending the claims measured.
type fired struct {
	mode                                    string
	hist                                    *hdrhistogram.Histogram // µs
	accepted, refused, failed, unsent, late int64
	elapsed                                 time.Duration
	err                                     error // the first transport error, if any
}

// outcomes counts the answers of a run's claims.
type outcomes struct {
	accepted, refused atomic.Int64
	soldOut           bool
}

// claim posts the claim of user i and counts its answer; only a transport
// error is an error.
func (o *outcomes) claim(ctx context.Context, hc *http.Client, url string, i int64) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	code, raw, err := post(ctx, hc, url, `{"user_id":"u`+strconv.FormatInt(i, 10)+`"}`, "")
	if err != nil {
		return err
	}
	if code == http.StatusAccepted {
		o.accepted.Add(1)
	} else if o.refused.Add(1) == 1 && !o.soldOut {
		fmt.Fprintf(os.Stderr, "claimcost: claim answered %d %s\n", code, raw)
	}
	return nil
}

// fire sends the claims: on a schedule from a bounded pool (open loop,
// cfg.rate > 0), or from cfg.c connections each sending its next claim when
// the last one is answered (closed loop).
func fire(ctx context.Context, hc *http.Client, cfg loadConfig, url string) (fired, error) {
	out := &outcomes{soldOut: cfg.soldOut}
	if cfg.rate > 0 {
		ctx, cancel := context.WithTimeout(ctx, openLoopBound(cfg))
		defer cancel()
		res, err := openloop.Run(ctx, openloop.Config{Rate: cfg.rate, N: int64(cfg.n), Workers: cfg.c},
			func(ctx context.Context, r openloop.Request) error { return out.claim(ctx, hc, url, r.Index+1) })
		if err != nil {
			return fired{}, err
		}
		return fired{mode: "open", hist: res.Latency, accepted: out.accepted.Load(), refused: out.refused.Load(),
			failed: res.Failed, unsent: res.Unsent, late: res.Late, elapsed: res.Elapsed, err: res.Err}, nil
	}
	return closedLoop(ctx, hc, cfg, url, out), nil
}

// openLoopBound is how long an open-loop run may take: its schedule, plus
// as much again and a minute for a server that falls behind.
func openLoopBound(cfg loadConfig) time.Duration {
	return 2*time.Duration(float64(cfg.n)/cfg.rate*float64(time.Second)) + time.Minute
}

// closedLoop sends the claims from cfg.c connections until cfg.n are sent
// or cfg.duration is up. Latency counts from each send: a closed loop has
// no schedule.
func closedLoop(ctx context.Context, hc *http.Client, cfg loadConfig, url string, out *outcomes) fired {
	hist := hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
	var mu sync.Mutex
	var next, failed atomic.Int64
	var firstErr error
	start := time.Now()
	var deadline time.Time
	if cfg.duration > 0 {
		deadline = start.Add(cfg.duration)
	}
	var wg sync.WaitGroup
	for range cfg.c {
		wg.Go(func() {
			local := hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
			var err1 error
			defer func() {
				mu.Lock()
				hist.Merge(local)
				if firstErr == nil {
					firstErr = err1
				}
				mu.Unlock()
			}()
			for {
				i := next.Add(1)
				if i > int64(cfg.n) || (!deadline.IsZero() && time.Now().After(deadline)) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := out.claim(ctx, hc, url, i); err != nil {
					failed.Add(1)
					if err1 == nil && !errors.Is(err, context.Canceled) {
						err1 = err
					}
					continue
				}
				_ = local.RecordValue(max(time.Since(t0).Microseconds(), 1))
			}
		})
	}
	wg.Wait()
	return fired{mode: "closed", hist: hist, accepted: out.accepted.Load(), refused: out.refused.Load(),
		failed: failed.Load(), elapsed: time.Since(start), err: firstErr}
}
