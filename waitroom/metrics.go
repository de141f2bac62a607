package waitroom

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of [NewCollector].
const (
	// DefaultMetricsTimeout bounds the Redis reads of one scrape.
	DefaultMetricsTimeout = 2 * time.Second
	// DefaultMetricsMaxRooms is the most rooms one scrape reports: the
	// series stay bounded however many rooms are active.
	DefaultMetricsMaxRooms = 1000
)

// Collector exports the counters of the waiting rooms the instance knows
// (Config.Known) to Prometheus, read from Redis at scrape time with
// [Rooms.Counts]: so every instance reports the same values, those of the
// whole room. Rooms of promotions drained (or, with the default
// Config.Known, unregistered) are no longer reported.
// Register it with prometheus.Registerer.MustRegister.
//
// Series, labelled by promotion:
//
//   - dibs_waitroom_waiting: places in line not yet reached by admission;
//   - dibs_waitroom_admitted_total: passes handed out;
//   - dibs_waitroom_passes_spent_total: passes spent by claims;
//   - dibs_waitroom_passes_expired_total: passes that expired unspent;
//   - dibs_waitroom_abandoned_total: places skipped because their user
//     stopped checking in;
//
// dibs_waitroom_metrics_errors_total, the scrapes whose Redis reads
// failed (the rooms' series are then left out of that scrape rather than
// failing the whole scrape); and, read from this instance's memory rather
// than Redis, dibs_waitroom_challenges_total{promotion, outcome}: the
// proof-of-work checks of the joins this instance answered (see
// ChallengeOutcomes), for each room that asked for a proof here since the
// instance started.
type Collector struct {
	rooms    *Rooms
	timeout  time.Duration
	maxRooms int
	errors   prometheus.Counter

	waiting, admitted, spent, expired, abandoned, challenges *prometheus.Desc
}

// NewCollector returns the collector of rooms' counters. timeout bounds the
// reads of one scrape (0: DefaultMetricsTimeout); maxRooms is the most rooms
// reported (0: DefaultMetricsMaxRooms).
func NewCollector(rooms *Rooms, timeout time.Duration, maxRooms int) *Collector {
	if timeout <= 0 {
		timeout = DefaultMetricsTimeout
	}
	if maxRooms <= 0 {
		maxRooms = DefaultMetricsMaxRooms
	}
	label := []string{"promotion"}
	return &Collector{
		rooms:    rooms,
		timeout:  timeout,
		maxRooms: maxRooms,
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dibs_waitroom_metrics_errors_total",
			Help: "Scrapes whose reading of the waiting rooms from Redis failed.",
		}),
		waiting:   prometheus.NewDesc("dibs_waitroom_waiting", "Places in a waiting room's line not yet reached by admission.", label, nil),
		admitted:  prometheus.NewDesc("dibs_waitroom_admitted_total", "Passes a waiting room handed out.", label, nil),
		spent:     prometheus.NewDesc("dibs_waitroom_passes_spent_total", "Passes spent by claims.", label, nil),
		expired:   prometheus.NewDesc("dibs_waitroom_passes_expired_total", "Passes that expired unspent and gave their unit back.", label, nil),
		abandoned: prometheus.NewDesc("dibs_waitroom_abandoned_total", "Places skipped by admission because their user stopped checking in.", label, nil),
		challenges: prometheus.NewDesc("dibs_waitroom_challenges_total",
			"Proof-of-work checks of the joins this instance answered, by outcome: issued (a fresh challenge handed out), solved (a valid proof let a join in), or why a join was refused (missing, forged, wrong_user, expired, unsolved, too_easy, reused).",
			[]string{"promotion", "outcome"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.waiting, c.admitted, c.spent, c.expired, c.abandoned, c.challenges} {
		ch <- d
	}
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector: it lists the known rooms and
// reads each one's counters, within the collector's timeout.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := c.collect(ctx, ch); err != nil {
		c.errors.Inc()
	}
	c.errors.Collect(ch)
}

func (c *Collector) collect(ctx context.Context, ch chan<- prometheus.Metric) error {
	known := c.rooms.known() // sorted: the same rooms in every scrape when there are too many
	c.rooms.pow.keep(known)
	if len(known) > c.maxRooms {
		known = known[:c.maxRooms]
	}
	var errs []error
	for _, k := range known {
		id := k.ID
		if n, ok := c.rooms.pow.read(id); ok {
			for i, outcome := range ChallengeOutcomes {
				ch <- prometheus.MustNewConstMetric(c.challenges, prometheus.CounterValue, float64(n[i]), id, outcome)
			}
		}
		n, err := c.rooms.Counts(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue // known, not yet opened or already gone
		}
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n.Waiting), id)
		ch <- prometheus.MustNewConstMetric(c.admitted, prometheus.CounterValue, float64(n.Admitted), id)
		ch <- prometheus.MustNewConstMetric(c.spent, prometheus.CounterValue, float64(n.PassesSpent), id)
		ch <- prometheus.MustNewConstMetric(c.expired, prometheus.CounterValue, float64(n.PassesExpired), id)
		ch <- prometheus.MustNewConstMetric(c.abandoned, prometheus.CounterValue, float64(n.Abandoned), id)
	}
	return errors.Join(errs...)
}

// ChallengeOutcomes are the outcomes of proof-of-work checks, the outcome
// label of dibs_waitroom_challenges_total, in this order:
//
//   - issued: a fresh challenge handed out (with every refusal below);
//   - solved: a valid proof let a join in (and was spent);
//   - missing: a join without a proof (a first join, as a rule);
//   - forged: a challenge not made by a key in use (ErrProofForged);
//   - wrong_user: another user's or promotion's challenge (ErrProofNotYours);
//   - expired: a challenge past ChallengeTTL (ErrProofExpired);
//   - unsolved: a nonce that does not solve it (ErrProofUnsolved);
//   - too_easy: a challenge easier than the room asks now (ErrProofTooEasy);
//   - reused: a challenge presented before (ErrProofSpent).
var ChallengeOutcomes = []string{"issued", "solved", "missing", "forged", "wrong_user", "expired", "unsolved", "too_easy", "reused"}

// Indexes into ChallengeOutcomes.
const (
	outcomeIssued = iota
	outcomeSolved
	outcomeMissing
	outcomeForged
	outcomeWrongUser
	outcomeExpired
	outcomeUnsolved
	outcomeTooEasy
	outcomeReused
	numOutcomes
)

// outcomeOf is the outcome of a refusal for reason, one of the ErrProof
// errors.
func outcomeOf(reason error) int {
	for _, o := range []struct {
		err     error
		outcome int
	}{
		{ErrProofMissing, outcomeMissing}, {ErrProofForged, outcomeForged}, {ErrProofNotYours, outcomeWrongUser},
		{ErrProofExpired, outcomeExpired}, {ErrProofTooEasy, outcomeTooEasy}, {ErrProofSpent, outcomeReused},
	} {
		if errors.Is(reason, o.err) {
			return o.outcome
		}
	}
	return outcomeUnsolved
}

// powCounts counts the outcomes of the proof-of-work checks made through
// one Rooms value, by room: joins (any goroutine) add, the Collector reads
// and drops the rooms no longer known. The map holds a room from its first
// check until it is unregistered or no longer known at a scrape, so it is
// bounded by the rooms known; the counters are atomics, the map's lock is
// held only to find or drop an entry.
type powCounts struct {
	mu    sync.Mutex
	rooms map[string]*[numOutcomes]atomic.Uint64
}

// add counts one check of room id with the given outcomes.
func (p *powCounts) add(id string, outcomes ...int) {
	p.mu.Lock()
	n := p.rooms[id]
	if n == nil {
		if p.rooms == nil {
			p.rooms = make(map[string]*[numOutcomes]atomic.Uint64)
		}
		n = new([numOutcomes]atomic.Uint64)
		p.rooms[id] = n
	}
	p.mu.Unlock()
	for _, o := range outcomes {
		n[o].Add(1)
	}
}

// read returns room id's counts, in the order of ChallengeOutcomes, and
// whether the room had any check.
func (p *powCounts) read(id string) ([numOutcomes]uint64, bool) {
	p.mu.Lock()
	n := p.rooms[id]
	p.mu.Unlock()
	var out [numOutcomes]uint64
	if n == nil {
		return out, false
	}
	for i := range n {
		out[i] = n[i].Load()
	}
	return out, true
}

// keep drops the counts of the rooms not in known (sorted by id).
func (p *powCounts) keep(known []Known) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.rooms {
		if _, ok := slices.BinarySearchFunc(known, id, func(k Known, id string) int {
			switch {
			case k.ID < id:
				return -1
			case k.ID > id:
				return 1
			}
			return 0
		}); !ok {
			delete(p.rooms, id)
		}
	}
}

// drop drops room id's counts.
func (p *powCounts) drop(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.rooms, id)
}
