package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// CheckRoom is the name of the waiting-room check of a waiting-room run.
const CheckRoom = "waiting_room"

// RoomCounts are a promotion's waiting-room counts as the server reports
// them.
type RoomCounts struct {
	Waiting     int64 `json:"waiting"`
	Admitted    int64 `json:"admitted"`
	PassesSpent int64 `json:"passes_spent"`
	Abandoned   int64 `json:"abandoned"`
}

// RoomReport is what a waiting-room run saw of the room.
type RoomReport struct {
	// AdmitPerSecond is the configured admission rate.
	AdmitPerSecond int
	// Joined is the users whose join was answered with a place or a pass.
	Joined int
	// Admitted is the users who got an entry token.
	Admitted int
	// SoldOut is the users told sold_out while in line (or when joining).
	SoldOut int
	// InLine counts the other ways users left the line without claiming:
	// a status (ended, expired, abandoned, used), a problem code of the
	// join or lookup, a transport error, or timed_out.
	InLine map[string]int
	// Lookups is the status lookups sent.
	Lookups int
	// JoinElapsed is the time from the first join sent to the last join
	// answered.
	JoinElapsed time.Duration
	// JoinLatency and LookupLatency summarise the joins and lookups (a
	// join answered challenge_required is one join, and so is the join
	// again with the solution).
	JoinLatency, LookupLatency Latency
	// PowDifficulty is the room's proof-of-work difficulty (0: none).
	PowDifficulty int
	// Challenges is the joins answered challenge_required and sent again
	// with a solution.
	Challenges int
	// Solves is the challenges solved; SolveTime summarises the time each
	// took on one core of the machine that ran the load (at most
	// GOMAXPROCS solves at once), SolveTotal is their sum and Hashes the
	// SHA-256 they computed.
	Solves     int
	SolveTime  Latency
	SolveTotal time.Duration
	Hashes     int64
	// Elapsed is the time from the first join to the last user done.
	Elapsed time.Duration
	// MeasuredRate is the admission rate measured from the server's
	// admitted count (passes per second, the slope of a least-squares fit
	// over the samples taken while admission ran), 0 if too few samples.
	MeasuredRate float64
	// RateWindow is the time the measurement spans.
	RateWindow time.Duration
	// RateSamples is the number of samples the measurement used.
	RateSamples int
	// Server holds the room's counts as last read from the server.
	Server RoomCounts
}

// JoinsPerSecond is Joined per second of JoinElapsed.
func (r RoomReport) JoinsPerSecond() float64 {
	if r.JoinElapsed <= 0 {
		return 0
	}
	return float64(r.Joined) / r.JoinElapsed.Seconds()
}

// HashesPerSecond is the solves' hashes per second of their time: one
// core's rate.
func (r RoomReport) HashesPerSecond() float64 {
	if r.SolveTotal <= 0 {
		return 0
	}
	return float64(r.Hashes) / r.SolveTotal.Seconds()
}

// LookupsPerSecond is Lookups per second of Elapsed: what the server
// answered when the users' polling asks more than it can take, else the
// pace of their polling.
func (r RoomReport) LookupsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Lookups) / r.Elapsed.Seconds()
}

// RateError is MeasuredRate's deviation from AdmitPerSecond, as a
// fraction (0.02 is 2 % fast).
func (r RoomReport) RateError() float64 {
	if r.AdmitPerSecond == 0 || r.MeasuredRate == 0 {
		return 0
	}
	return r.MeasuredRate/float64(r.AdmitPerSecond) - 1
}

// standing is the answer of POST …/queue and GET …/queue/{user}.
type standing struct {
	Status      string `json:"status"`
	Position    int64  `json:"position"`
	PollAfterMS int64  `json:"poll_after_ms"`
	EntryToken  string `json:"entry_token"`
}

// roomEvent is what a user's goroutine tells the run's goroutine.
type roomEvent struct {
	kind    string // "join", "lookup", "solve", "admitted", "done"
	latency time.Duration
	ok      bool   // join: answered with a place or a pass
	retry   bool   // join: answered challenge_required, solved and sent again
	hashes  int64  // solve: the hashes it took
	res     result // done
}

// runRoom runs every user through the waiting room: one goroutine per user
// joins, polls its standing and claims when admitted; requests in flight
// are bounded by cfg.Concurrency. Events flow to this goroutine, which owns
// the tally, the counts and the progress output. A sampler reads the
// server's admitted count meanwhile, for the admission rate.
func (r *runner) runRoom(ctx context.Context, t *tally) *RoomReport {
	cfg := r.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.RoomTimeout)
	defer cancel()
	sem := make(chan struct{}, cfg.Concurrency)
	solvers := make(chan struct{}, runtime.GOMAXPROCS(0))
	events := make(chan roomEvent, cfg.Concurrency)

	sampleCtx, stopSampling := context.WithCancel(ctx)
	samples := make(chan []rateSample, 1)
	var bg sync.WaitGroup
	bg.Go(func() { samples <- r.sampleAdmitted(sampleCtx) })

	c := newRoomCount(cfg, t)
	var users sync.WaitGroup
	for u := range cfg.Users {
		users.Go(func() { r.roomUser(ctx, u, sem, solvers, events) })
	}
	bg.Go(func() {
		users.Wait()
		close(events)
	})

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for open := true; open; {
		select {
		case ev, ok := <-events:
			if !ok {
				open = false
				break
			}
			c.add(ev)
		case <-tick.C:
			c.progress(cfg.Progress)
		}
	}
	rep := c.rep
	rep.Elapsed = time.Since(c.start)
	stopSampling()
	rep.MeasuredRate, rep.RateWindow, rep.RateSamples = admissionRate(<-samples)
	bg.Wait()
	c.progress(cfg.Progress)
	if !c.lastJoin.IsZero() {
		rep.JoinElapsed = c.lastJoin.Sub(c.start)
	}
	rep.JoinLatency, rep.LookupLatency, rep.SolveTime = latencyOf(c.joinHist), latencyOf(c.lookupHist), latencyOf(c.solveHist)
	return rep
}

// roomCount is what runRoom counts from the users' events; runRoom's
// goroutine owns it.
type roomCount struct {
	rep                  *RoomReport
	t                    *tally // the claims' outcomes
	users                int
	start                time.Time
	joinHist, lookupHist *hdrhistogram.Histogram
	solveHist            *hdrhistogram.Histogram
	joinsAnswered        int
	done, accepted       int       // users done, claims accepted
	lastJoin             time.Time // when the last join was answered
}

func newRoomCount(cfg Config, t *tally) *roomCount {
	return &roomCount{
		rep:        &RoomReport{AdmitPerSecond: cfg.AdmitPerSecond, PowDifficulty: cfg.PowDifficulty, InLine: map[string]int{}},
		t:          t,
		users:      cfg.Users,
		start:      time.Now(),
		joinHist:   hdrhistogram.New(histMin, histMax, histSigFigs),
		lookupHist: hdrhistogram.New(histMin, histMax, histSigFigs),
		solveHist:  hdrhistogram.New(histMin, histMax, histSigFigs),
	}
}

// add counts one event.
func (c *roomCount) add(ev roomEvent) {
	rep := c.rep
	switch ev.kind {
	case "join":
		recordLatency(c.joinHist, ev.latency)
		if ev.retry {
			rep.Challenges++
			break
		}
		c.joinsAnswered++
		if ev.ok {
			rep.Joined++
		}
		if c.joinsAnswered == c.users {
			c.lastJoin = time.Now()
		}
	case "lookup":
		recordLatency(c.lookupHist, ev.latency)
		rep.Lookups++
	case "solve":
		recordLatency(c.solveHist, ev.latency)
		rep.Solves++
		rep.Hashes += ev.hashes
		rep.SolveTotal += ev.latency
	case "admitted":
		rep.Admitted++
	case "done":
		c.done++
		c.t.add(ev.res)
		switch {
		case ev.res.outcome == OutcomeAccepted:
			c.accepted++
		case ev.res.inLine && ev.res.outcome == "sold_out":
			rep.SoldOut++
		case ev.res.inLine:
			rep.InLine[ev.res.outcome]++
		}
	}
}

// progress writes one progress line to w.
func (c *roomCount) progress(w io.Writer) {
	fmt.Fprintf(w, "room: %d joined, %d admitted, %d claimed, %d sold out in line, %d of %d users done (%s)\n",
		c.rep.Joined, c.rep.Admitted, c.accepted, c.rep.SoldOut, c.done, c.users, human(time.Since(c.start)))
}

// roomUser is one user's way through the room. It ends with exactly one
// "done" event; a user that never claimed has a result marked inLine.
func (r *runner) roomUser(ctx context.Context, u int, sem, solvers chan struct{}, events chan<- roomEvent) {
	rt := roomTrip{r: r, ctx: ctx, sem: sem, solvers: solvers, events: events}
	queue := r.cfg.Target + "/v1/promotions/" + url.PathEscape(r.cfg.PromotionID) + "/queue"
	status := queue + "/" + url.PathEscape(r.userID(u))
	inLine := func(outcome, detail string) {
		events <- roomEvent{kind: "done", res: result{user: u, inLine: true, outcome: outcome, detail: detail}}
	}
	rep := rt.join(queue, r.userID(u))
	for {
		if rep.outcome != "" {
			inLine(rep.outcome, rep.detail)
			return
		}
		st := rep.st
		switch st.Status {
		case "admitted":
			if st.EntryToken == "" {
				inLine(OutcomeBadResponse, "admitted without entry_token")
				return
			}
			events <- roomEvent{kind: "admitted"}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				inLine("timed_out", ctx.Err().Error())
				return
			}
			res := r.claimWith(ctx, u, st.EntryToken)
			<-sem
			events <- roomEvent{kind: "done", res: res}
			return
		case "waiting":
			pause := min(time.Duration(max(st.PollAfterMS, 1))*time.Millisecond, r.cfg.MaxPoll)
			timer := time.NewTimer(pause)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				inLine("timed_out", fmt.Sprintf("still waiting at position %d", st.Position))
				return
			}
			rep = rt.send(http.MethodGet, status, nil)
			events <- roomEvent{kind: "lookup", latency: rep.took, ok: rep.outcome == ""}
		case "sold_out":
			inLine("sold_out", "")
			return
		default: // ended, expired, abandoned, used: not a way the run should go
			inLine("room_"+st.Status, "status "+st.Status+" in line")
			return
		}
	}
}

// rateSample is the server's admitted count at a time.
type rateSample struct {
	at       time.Time
	admitted int64
}

// sampleAdmitted reads the promotion's admitted count every
// cfg.RateSampleInterval until ctx ends; failed reads are skipped.
func (r *runner) sampleAdmitted(ctx context.Context) []rateSample {
	var out []rateSample
	tick := time.NewTicker(r.cfg.RateSampleInterval)
	defer tick.Stop()
	for {
		p, err := r.getPromotion(ctx)
		if err == nil {
			out = append(out, rateSample{at: time.Now(), admitted: p.WaitingRoom.Admitted})
		}
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// admissionRate fits a line through the samples taken while admission ran
// — after the count first moved and before it reached its final value —
// and returns its slope (passes per second), the time the samples span and
// their number. Fewer than three such samples give 0.
func admissionRate(samples []rateSample) (rate float64, window time.Duration, n int) {
	if len(samples) == 0 {
		return 0, 0, 0
	}
	first, final := samples[0].admitted, samples[len(samples)-1].admitted
	var used []rateSample
	for _, s := range samples {
		if s.admitted > first && s.admitted < final {
			used = append(used, s)
		}
	}
	if len(used) < 3 {
		return 0, 0, len(used)
	}
	t0 := used[0].at
	var sx, sy, sxx, sxy float64
	for _, s := range used {
		x, y := s.at.Sub(t0).Seconds(), float64(s.admitted)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	k := float64(len(used))
	den := k*sxx - sx*sx
	if den <= 0 {
		return 0, 0, len(used)
	}
	return (k*sxy - sx*sy) / den, used[len(used)-1].at.Sub(t0), len(used)
}

// checkRoom checks the room against the claims: every accepted claim
// spent one pass, and no claim was accepted without one.
func checkRoom(accepted int64, room *RoomReport, serverKnown bool) Check {
	c := Check{Name: CheckRoom, Title: "every accepted claim spent one pass (server: passes_spent == accepted <= admitted)"}
	if !serverKnown {
		c.Status = Fail
		c.Detail = "could not read the promotion's counts"
		return c
	}
	s := room.Server
	c.Status = passIf(s.PassesSpent == accepted && accepted <= s.Admitted && int64(room.Admitted) >= accepted)
	c.Detail = fmt.Sprintf("%d passes spent, %d accepted, %d admitted (clients saw %d), %d abandoned",
		s.PassesSpent, accepted, s.Admitted, room.Admitted, s.Abandoned)
	return c
}
