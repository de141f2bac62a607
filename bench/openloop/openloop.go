// Package openloop sends requests on a fixed schedule and times each one
// from when it was due, not from when it was sent, so a slow server cannot
// hide its slowness by slowing the sender down (coordinated omission).
//
// Request i is due at Start + i/Rate. One dispatcher goroutine walks the
// schedule: it sleeps until the next request is due, then hands every request
// whose time has come to a bounded pool of workers. When every worker is busy
// the dispatcher waits for one; the requests it holds are late, and their
// latency still counts from their due time, so the wait shows up in the
// figures instead of disappearing from them. Nothing queues beyond the pool:
// memory stays bounded at any rate.
package openloop

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds from 1 µs to ten minutes, to three
// significant digits.
const (
	histMin     = 1
	histMax     = int64(10 * time.Minute / time.Microsecond)
	histSigFigs = 3
)

// DefaultLateAfter is how far past its due time a request may be handed to
// a worker before it counts as late in [Result.Late].
const DefaultLateAfter = time.Millisecond

// Schedule is a fixed-rate schedule of due times.
type Schedule struct {
	// Start is when request 0 is due.
	Start time.Time
	// Rate is the number of requests due per second; it must be above zero.
	Rate float64
}

// Due returns when request i is due: Start + i/Rate.
func (s Schedule) Due(i int64) time.Time {
	return s.Start.Add(time.Duration(float64(i) * float64(time.Second) / s.Rate))
}

// Latency is the time from when a request was due to when it completed. It
// is never below zero: a request cannot complete before it is due.
func Latency(due, done time.Time) time.Duration { return max(done.Sub(due), 0) }

// Request is one request of the schedule, as a worker receives it.
type Request struct {
	// Index is the request's place in the schedule, from 0.
	Index int64
	// Due is when the request was due.
	Due time.Time
}

// Config says what [Run] sends.
type Config struct {
	// Rate is the number of requests per second; it must be above zero.
	Rate float64
	// N is the number of requests; it must be above zero.
	N int64
	// Workers is the size of the pool that sends the requests: the most
	// requests in flight at once. It must be above zero.
	Workers int
	// LateAfter is how far past its due time a request may be handed to a
	// worker before it counts as late. Defaults to DefaultLateAfter.
	LateAfter time.Duration
}

// Result is what [Run] measured.
type Result struct {
	// Latency holds, in microseconds, the time from when each completed
	// request was due to when it completed.
	Latency *hdrhistogram.Histogram
	// Completed is the number of requests whose do returned nil.
	Completed int64
	// Failed is the number of requests whose do returned an error; their
	// latency is not recorded.
	Failed int64
	// Unsent is the number of requests never handed to a worker because
	// the context ended first.
	Unsent int64
	// Late is the number of requests handed to a worker more than
	// Config.LateAfter after they were due: the pool was exhausted or the
	// dispatcher woke late. Their latency counts from the due time all the
	// same.
	Late int64
	// Start is when request 0 was due.
	Start time.Time
	// Elapsed runs from Start to the completion of the last request.
	Elapsed time.Duration
	// Err is the first error a do returned, if any.
	Err error
}

// errConfig is returned for a Config that Run cannot follow.
var errConfig = errors.New("openloop: Rate, N and Workers must be above zero")

// Run sends cfg.N requests at cfg.Rate per second through cfg.Workers
// workers, calling do for each, and returns when every request handed to a
// worker has completed. do must honour its context. When ctx ends, the
// requests not yet handed out are counted in Result.Unsent.
func Run(ctx context.Context, cfg Config, do func(context.Context, Request) error) (Result, error) {
	if !(cfg.Rate > 0) || cfg.N <= 0 || cfg.Workers <= 0 {
		return Result{}, errConfig
	}
	if cfg.LateAfter <= 0 {
		cfg.LateAfter = DefaultLateAfter
	}
	sched := Schedule{Start: time.Now(), Rate: cfg.Rate}
	jobs := make(chan Request)
	parts := make([]part, cfg.Workers)
	var wg sync.WaitGroup
	for w := range parts {
		parts[w].latency = hdrhistogram.New(histMin, histMax, histSigFigs)
		wg.Go(func() { parts[w].work(ctx, jobs, do) })
	}
	res := Result{Latency: hdrhistogram.New(histMin, histMax, histSigFigs), Start: sched.Start}
	res.Late, res.Unsent = dispatch(ctx, sched, cfg, jobs)
	close(jobs)
	wg.Wait()
	last := sched.Start
	for _, p := range parts {
		res.Latency.Merge(p.latency)
		res.Completed += p.completed
		res.Failed += p.failed
		if res.Err == nil {
			res.Err = p.err
		}
		if p.last.After(last) {
			last = p.last
		}
	}
	res.Elapsed = last.Sub(sched.Start)
	return res, nil
}

// dispatch hands the requests to the workers as they fall due and returns
// how many were late and how many were never handed out.
func dispatch(ctx context.Context, sched Schedule, cfg Config, jobs chan<- Request) (late, unsent int64) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for i := int64(0); i < cfg.N; i++ {
		due := sched.Due(i)
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return late, cfg.N - i
			}
		}
		select {
		case jobs <- Request{Index: i, Due: due}:
		case <-ctx.Done():
			return late, cfg.N - i
		}
		if time.Since(due) > cfg.LateAfter {
			late++
		}
	}
	return late, 0
}

// part is one worker's share of the result; only that worker touches it
// until Run merges the parts.
type part struct {
	latency           *hdrhistogram.Histogram
	completed, failed int64
	err               error
	last              time.Time // when its last request completed
}

// work runs the requests it receives until jobs is closed.
func (p *part) work(ctx context.Context, jobs <-chan Request, do func(context.Context, Request) error) {
	for r := range jobs {
		err := do(ctx, r)
		done := time.Now()
		p.last = done
		if err != nil {
			p.failed++
			if p.err == nil {
				p.err = err
			}
			continue
		}
		p.completed++
		_ = p.latency.RecordValue(max(Latency(r.Due, done).Microseconds(), histMin))
	}
}
