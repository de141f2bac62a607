package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/dibsio/dibs/client"
)

// maxBody bounds how much of an answer is read; the API's answers are small.
const maxBody = 64 << 10

// Latencies are recorded in microseconds from 1 µs to a minute, to three
// significant digits.
const (
	histMin     = 1
	histMax     = int64(time.Minute / time.Microsecond)
	histSigFigs = 3
)

// APIError is an answer from the server that is not the one a step of the
// run needs (creating the promotion, reading it), with the problem's code.
type APIError struct {
	// Op is the step: "create promotion", "get promotion", ...
	Op string
	// Status is the HTTP status.
	Status int
	// Code is the problem's `code` member, empty if the body had none.
	Code string
	// Detail is the problem's detail (or the start of the body).
	Detail string
}

// Error implements error.
func (e *APIError) Error() string {
	s := fmt.Sprintf("%s: HTTP %d", e.Op, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// problem is the part of an RFC 9457 problem the bench reads.
type problem struct {
	Code   string `json:"code"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

// result is the outcome of one claim request.
type result struct {
	user    int  // 0-based user number
	inLine  bool // the outcome came from the waiting room: no claim was sent
	latency time.Duration
	outcome string
	rank    int64
	claimID string
	detail  string // what went wrong, for unexpected outcomes
}

// acceptance is one 202 answer.
type acceptance struct {
	user    int
	rank    int64
	claimID string
}

// tally accumulates results. It is owned by the goroutine that runs the
// claims phase: workers hand it results, never touch it.
type tally struct {
	hist        *hdrhistogram.Histogram
	outcomes    map[string]int
	firstErrors map[string]string
	accepted    []acceptance
	sent        int // claims sent (results not inLine)
}

func newTally() *tally {
	return &tally{
		hist:        hdrhistogram.New(histMin, histMax, histSigFigs),
		outcomes:    map[string]int{},
		firstErrors: map[string]string{},
	}
}

func (t *tally) add(r result) {
	if !r.inLine {
		recordLatency(t.hist, r.latency)
		t.sent++
	}
	t.outcomes[r.outcome]++
	if r.outcome == OutcomeAccepted {
		t.accepted = append(t.accepted, acceptance{user: r.user, rank: r.rank, claimID: r.claimID})
	}
	if r.detail != "" && t.firstErrors[r.outcome] == "" {
		t.firstErrors[r.outcome] = r.detail
	}
}

// runner holds what one Run needs; everything in it is read-only once the
// claims start, except the tally, which only the run's own goroutine writes.
type runner struct {
	cfg      Config
	client   *http.Client   // the claims' and the waiting room's requests: the hot loop
	api      *client.Client // everything else: create, read, spot checks
	claims   string         // URL of the promotion's claims endpoint
	inFlight int            // the most claims in flight at once
}

// Run creates a promotion on cfg.Target, fires the claims, waits for the
// server to confirm every accepted claim, checks the invariants and returns
// the report. It returns an error only when no meaningful report can be
// made: a bad Config (wrapping [ErrInvalidConfig]), the promotion cannot be
// created (an [*APIError] or a transport error), or ctx ends. A broken
// invariant is not an error: it is a failed [Check] in the report.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	if cfg.PromotionID == "" {
		cfg.PromotionID = newPromotionID()
	}
	r, closeIdle, err := newRunner(cfg)
	if err != nil {
		return Report{}, err
	}
	defer closeIdle()

	if err := r.createPromotion(ctx); err != nil {
		return Report{}, err
	}
	fmt.Fprintf(cfg.Progress, "created promotion %s: stock %d, per-user limit %d\n", cfg.PromotionID, cfg.Stock, cfg.PerUserLimit)

	t := newTally()
	start := time.Now()
	room := r.fire(ctx, t)
	claimsDone := time.Now()
	if err := ctx.Err(); err != nil {
		return Report{}, fmt.Errorf("claims: %w", err)
	}

	conf, err := r.confirm(ctx, claimsDone)
	if err != nil {
		return Report{}, err
	}
	var spots []spotResult
	if cfg.SpotChecks > 0 {
		spots, err = r.spotCheck(ctx, t.accepted)
		if err != nil {
			return Report{}, err
		}
	}
	return r.report(t, conf, spots, room, claimsDone.Sub(start)), nil
}

// newRunner makes the HTTP clients of a run of cfg (checked and with its
// promotion id): closeIdle closes the idle connections of the transport it
// made, if it made one.
func newRunner(cfg Config) (r *runner, closeIdle func(), err error) {
	inFlight := cfg.Concurrency
	if cfg.Waves > 0 && !cfg.WaitingRoom {
		inFlight = ceilDiv(cfg.Users*cfg.Repeat, cfg.Waves)
	}
	closeIdle = func() {}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := newTransport(inFlight)
		closeIdle = tr.CloseIdleConnections
		hc = &http.Client{Transport: tr, Timeout: cfg.RequestTimeout}
	}
	api, err := client.New(cfg.Target, client.WithAdminToken(cfg.AdminToken), client.WithHTTPClient(hc), client.WithUserAgent("dibs-bench"))
	if err != nil {
		closeIdle()
		return nil, nil, fmt.Errorf("%w: Target: %v", ErrInvalidConfig, err)
	}
	return &runner{
		cfg:      cfg,
		client:   hc,
		api:      api,
		claims:   cfg.Target + "/v1/promotions/" + url.PathEscape(cfg.PromotionID) + "/claims",
		inFlight: inFlight,
	}, closeIdle, nil
}

// fire sends the claims the way the configuration asks: through the
// waiting room (whose report it returns), in waves, or as a steady stream.
func (r *runner) fire(ctx context.Context, t *tally) *RoomReport {
	switch {
	case r.cfg.WaitingRoom:
		return r.runRoom(ctx, t)
	case r.cfg.Waves > 0:
		r.runWaves(ctx, t)
	default:
		r.runSteady(ctx, t)
	}
	return nil
}

// report puts together what the clients saw (t), what the server
// confirmed (conf) and the spot checks, with the invariants' checks.
func (r *runner) report(t *tally, conf confirmation, spots []spotResult, room *RoomReport, elapsed time.Duration) Report {
	cfg := r.cfg
	rep := Report{
		Target:       cfg.Target,
		PromotionID:  cfg.PromotionID,
		Stock:        cfg.Stock,
		Users:        cfg.Users,
		PerUserLimit: cfg.PerUserLimit,
		Repeat:       cfg.Repeat,
		Waves:        cfg.Waves,
		Concurrency:  r.inFlight,
		Claims:       cfg.Users * cfg.Repeat,
		Elapsed:      elapsed,
		Latency:      latencyOf(t.hist),
		Accepted:     int64(len(t.accepted)),
		Rejected:     map[string]int{},
		AllIssued:    conf.allIssued,
		IssuedAfter:  conf.after,
		Server:       conf.counts,
		Room:         room,
	}
	if room != nil {
		room.Server = conf.room
		rep.Claims = t.sent
	}
	for code, n := range t.outcomes {
		if code != OutcomeAccepted {
			rep.Rejected[code] = n
		}
	}
	rep.Checks = r.checks(t, conf, spots)
	if room != nil {
		rep.Checks = append(rep.Checks, checkRoom(int64(len(t.accepted)), room, conf.known))
	}
	return rep
}

func (r *runner) checks(t *tally, conf confirmation, spots []spotResult) []Check {
	cfg := r.cfg
	answered := checkAnswered(t.outcomes, t.firstErrors)
	allAnswered := answered.Status == Pass
	ranks := make([]int64, len(t.accepted))
	perUser := map[int]int{}
	for i, a := range t.accepted {
		ranks[i] = a.rank
		perUser[a.user]++
	}
	accepted := int64(len(t.accepted))
	return []Check{
		answered,
		checkNoOversell(accepted, conf.counts.Accepted, conf.known, cfg.Stock),
		checkExactCount(accepted, expectedAccepted(cfg.Stock, cfg.Users, cfg.PerUserLimit, cfg.Repeat), allAnswered),
		checkRanks(ranks),
		checkPerUserLimit(perUser, cfg.PerUserLimit, r.userID),
		checkServerCounts(accepted, conf.counts, conf.known, allAnswered),
		checkAllIssued(conf.counts, conf.known, conf.timedOut, cfg.ConfirmTimeout.String()),
		checkSpot(spots, cfg.SpotChecks < 0),
	}
}

func usDuration(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// recordLatency records d in h, clamped into its trackable range.
func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	us := min(max(d.Microseconds(), histMin), histMax)
	_ = h.RecordValue(us) // cannot fail: clamped into the trackable range
}

// latencyOf summarises h.
func latencyOf(h *hdrhistogram.Histogram) Latency {
	return Latency{
		P50:  usDuration(h.ValueAtQuantile(50)),
		P99:  usDuration(h.ValueAtQuantile(99)),
		P999: usDuration(h.ValueAtQuantile(99.9)),
		Max:  usDuration(h.Max()),
		Mean: time.Duration(h.Mean() * float64(time.Microsecond)),
	}
}

// claim sends one claim for user u and classifies the answer.
func (r *runner) claim(ctx context.Context, u int) result { return r.claimWith(ctx, u, "") }

// claimWith sends one claim for user u, with entryToken as X-Entry-Token
// when not empty, and classifies the answer.
func (r *runner) claimWith(ctx context.Context, u int, entryToken string) result {
	res := result{user: u}
	body := []byte(`{"user_id":"` + r.userID(u) + `"}`) // user ids are validated identifiers: no escaping needed
	var hdr []string
	if entryToken != "" {
		hdr = []string{"X-Entry-Token", entryToken}
	}
	start := time.Now()
	status, data, err := r.do(ctx, http.MethodPost, r.claims, body, false, hdr...)
	res.latency = time.Since(start)
	switch {
	case err != nil && status == 0:
		res.outcome, res.detail = OutcomeTransportError, err.Error()
	case err != nil:
		res.outcome, res.detail = OutcomeBadResponse, err.Error()
	case status == http.StatusAccepted:
		var ok struct {
			Status  string `json:"status"`
			ClaimID string `json:"claim_id"`
			Rank    int64  `json:"rank"`
		}
		if json.Unmarshal(data, &ok) != nil || ok.Rank < 1 || ok.ClaimID == "" {
			res.outcome, res.detail = OutcomeBadResponse, "202 without claim_id and rank: "+snippet(data)
			break
		}
		res.outcome, res.rank, res.claimID = OutcomeAccepted, ok.Rank, ok.ClaimID
	default:
		var p problem
		if json.Unmarshal(data, &p) != nil || p.Code == "" {
			res.outcome = "http_" + strconv.Itoa(status)
			res.detail = snippet(data)
			break
		}
		res.outcome = p.Code
		if !definite[p.Code] {
			res.detail = fmt.Sprintf("HTTP %d: %s", status, p.Detail)
		}
	}
	return res
}

// runWaves fires the claims in cfg.Waves waves. Each wave's goroutines all
// wait behind a barrier so their requests leave together, and the next wave
// starts only when every answer of this one is in.
func (r *runner) runWaves(ctx context.Context, t *tally) {
	total := r.cfg.Users * r.cfg.Repeat
	next := 0
	for w := range r.cfg.Waves {
		size := total / r.cfg.Waves
		if w < total%r.cfg.Waves {
			size++
		}
		results := make([]result, size)
		var ready, done sync.WaitGroup
		gate := make(chan struct{})
		ready.Add(size)
		for i := range size {
			u := (next + i) % r.cfg.Users
			done.Go(func() {
				ready.Done()
				<-gate
				results[i] = r.claim(ctx, u)
			})
		}
		ready.Wait()
		began := time.Now()
		close(gate)
		done.Wait()
		took := time.Since(began)
		next += size

		waveOutcomes := map[string]int{}
		for _, res := range results {
			t.add(res)
			waveOutcomes[res.outcome]++
		}
		fmt.Fprintf(r.cfg.Progress, "wave %d/%d: %d sent, %s in %s\n", w+1, r.cfg.Waves, size, outcomeLine(waveOutcomes), human(took))
		if ctx.Err() != nil {
			return
		}
	}
}

// runSteady fires the claims from cfg.Concurrency workers that each take the
// next claim as soon as their previous one is answered. Results flow back
// over a channel to this goroutine, which owns the tally and the progress
// output.
func (r *runner) runSteady(ctx context.Context, t *tally) {
	total := r.cfg.Users * r.cfg.Repeat
	var next atomic.Int64
	results := make(chan result, r.cfg.Concurrency)
	var workers sync.WaitGroup
	for range min(r.cfg.Concurrency, total) {
		workers.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(total) {
					return
				}
				results <- r.claim(ctx, int(i)%r.cfg.Users)
			}
		})
	}
	var closer sync.WaitGroup
	closer.Go(func() {
		workers.Wait()
		close(results)
	})

	step := max(1, total/10)
	done := 0
	began := time.Now()
	seen := map[string]int{}
	for res := range results {
		t.add(res)
		seen[res.outcome]++
		done++
		if done%step == 0 || done == total {
			fmt.Fprintf(r.cfg.Progress, "%d/%d claims: %s (%s)\n", done, total, outcomeLine(seen), human(time.Since(began)))
		}
	}
	closer.Wait()
}

// outcomeLine says "78 accepted, 122 rejected (sold_out 122)".
func outcomeLine(outcomes map[string]int) string {
	accepted, rejected := outcomes[OutcomeAccepted], 0
	var parts []string
	for _, code := range sortedKeys(outcomes) {
		if code == OutcomeAccepted {
			continue
		}
		rejected += outcomes[code]
		parts = append(parts, fmt.Sprintf("%s %d", code, outcomes[code]))
	}
	s := fmt.Sprintf("%d accepted, %d rejected", accepted, rejected)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
