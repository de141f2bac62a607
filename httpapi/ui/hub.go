package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Defaults of HubConfig.
const (
	DefaultInterval       = time.Second
	DefaultHistory        = 10 * time.Minute
	DefaultMaxSubscribers = 16
	DefaultSourceTimeout  = 5 * time.Second
)

// ErrFull means the Hub has HubConfig.MaxSubscribers subscribers already.
var ErrFull = errors.New("ui: too many dashboards open")

// Promotion is one promotion as the dashboard shows it. Source fills in
// everything but the rates, which the Hub computes from the samples it
// took.
type Promotion struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Mode      string `json:"mode"`
	Kind      string `json:"kind"`
	State     string `json:"state"`
	Stock     int64  `json:"stock"`
	Accepted  int64  `json:"accepted"`
	Pending   int64  `json:"pending"`
	Issued    int64  `json:"issued"`
	Failed    int64  `json:"failed"` // dead letters waiting for replay or void
	Remaining *int64 `json:"remaining"`
	// Paused is whether an admin paused the promotion's claims.
	Paused bool `json:"paused"`
	// Drained is whether the promotion ended and every claim of it is
	// settled.
	Drained bool `json:"drained"`
	// Room is the waiting room's counts; nil without one.
	Room *Room `json:"waiting_room,omitempty"`
	// Consumers are the promotion's confirmation consumers by instance.
	Consumers []Consumers `json:"consumers"`
	// IssueLagSeconds is the age of the oldest claim accepted and not yet
	// issued nor dead-lettered, read from its work stream: 0 when every
	// accepted claim is settled. Set by Source.
	IssueLagSeconds float64 `json:"issue_lag_seconds"`

	// ClaimsPerSecond is the rate of accepted claims since the last
	// sample. Set by the Hub.
	ClaimsPerSecond float64 `json:"claims_per_second"`
	// RejectedPerSecond is the rate of claims this instance refused (a
	// code of RejectCodes) since the last sample. Set by the Hub.
	RejectedPerSecond float64 `json:"rejected_per_second"`
}

// Room is a waiting room's counts.
type Room struct {
	Waiting        int64 `json:"waiting"`
	Admitted       int64 `json:"admitted"`
	Abandoned      int64 `json:"abandoned"`
	AdmitPerSecond int   `json:"admit_per_second"`
	// AdmittedPerSecond is the measured admission rate since the last
	// sample. Set by the Hub.
	AdmittedPerSecond float64 `json:"admitted_per_second"`
}

// Consumers counts the consumers one instance runs for a promotion, and
// the entries they hold unacknowledged.
type Consumers struct {
	Instance  string `json:"instance"`
	Consumers int    `json:"consumers"`
	Pending   int64  `json:"pending"`
}

// Snapshot is what every dashboard receives once per interval.
type Snapshot struct {
	At         time.Time   `json:"at"`
	Promotions []Promotion `json:"promotions"`
	// Error says why the promotions could not be read this time; the last
	// good promotions are repeated then.
	Error string `json:"error,omitempty"`
}

// Event names of a Subscription.
const (
	// EventHistory carries the samples of the last HubConfig.History, per
	// promotion: {"interval_ms": N, "series": {"<id>": [[unix_ms,
	// claims/s, rejected/s, settled/s, issue_lag_s, waiting, admitted/s,
	// abandoned/s], ...]}}. The issue lag and waiting are null for a
	// sample taken while no dashboard was open (they are read from Redis
	// then; waiting is also taken from a room's tick that carries it);
	// admitted/s and abandoned/s are null where the room's totals were
	// neither read nor ticked here (Tally.Room) — and for a promotion
	// without a room. A run of samples with nothing to draw is sent as its
	// first and last. It is a subscription's first event.
	EventHistory = "history"
	// EventSnapshot carries a Snapshot.
	EventSnapshot = "snapshot"
)

// Event is one message to a dashboard: a name and its JSON data, shared
// by every subscriber (read-only).
type Event struct {
	Name string
	Data []byte
}

// HubConfig configures a Hub.
type HubConfig struct {
	// Source reads every promotion the dashboard shows. Required.
	Source func(ctx context.Context) ([]Promotion, error)
	// Interval is the time between two snapshots. Defaults to
	// DefaultInterval.
	Interval time.Duration
	// History is how far back the charts go. Defaults to DefaultHistory.
	History time.Duration
	// MaxSubscribers bounds the open dashboards; past it Subscribe answers
	// ErrFull. Defaults to DefaultMaxSubscribers.
	MaxSubscribers int
	// SourceTimeout bounds one Source call. Defaults to
	// DefaultSourceTimeout.
	SourceTimeout time.Duration
	// Logger receives Source's errors. Defaults to slog.Default().
	Logger *slog.Logger
	// Tally is this instance's counts of answers and issues, and the
	// latest tick of each waiting room it ticks, sampled every Interval
	// once Start was called, whether or not a dashboard is open. Defaults
	// to a new Tally.
	Tally *Tally
}

func (c HubConfig) withDefaults() HubConfig {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.History == 0 {
		c.History = DefaultHistory
	}
	if c.MaxSubscribers == 0 {
		c.MaxSubscribers = DefaultMaxSubscribers
	}
	if c.SourceTimeout == 0 {
		c.SourceTimeout = DefaultSourceTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Tally == nil {
		c.Tally = new(Tally)
	}
	return c
}

func (c HubConfig) validate() error {
	switch {
	case c.Source == nil:
		return errors.New("ui: HubConfig.Source is required")
	case c.Interval < 0:
		return fmt.Errorf("ui: HubConfig.Interval must not be negative, got %s", c.Interval)
	case c.History < c.Interval:
		return fmt.Errorf("ui: HubConfig.History must be at least HubConfig.Interval, got %s", c.History)
	case c.MaxSubscribers < 0:
		return fmt.Errorf("ui: HubConfig.MaxSubscribers must not be negative, got %d", c.MaxSubscribers)
	case c.SourceTimeout < 0:
		return fmt.Errorf("ui: HubConfig.SourceTimeout must not be negative, got %s", c.SourceTimeout)
	}
	return nil
}

// Hub samples every promotion once per interval and fans the snapshot out
// to every subscribed dashboard, however many there are: N dashboards cost
// one read of the promotions per interval, not N.
//
// Its loop goroutine owns the subscriber set, the last snapshot and the
// rings of samples (HubConfig.History per promotion). Once Start is called
// it runs until Stop, and samples the Tally (with the rooms' latest ticks)
// every interval whether or not anyone watches: the charts are there when
// a page opens. Source, which
// reads Redis and the database, is called only while someone subscribes.
// Without Start the loop runs only while someone subscribes. Subscribe,
// Close, Start and Stop talk to it over channels.
type Hub struct {
	cfg HubConfig
	// join and leave carry subscriptions to the loop; each holds up to
	// MaxSubscribers, so sends under mu never block.
	join, leave chan *Subscription
	// wake asks the loop to check whether it may stop (after Stop).
	wake chan struct{}
	// hist belongs to the loop goroutine; it outlives a loop that stops, for
	// the next one.
	hist *history

	mu      sync.Mutex // guards count, kept and running, and orders sends on join and leave
	count   int        // open subscriptions
	kept    bool       // Start was called and Stop was not
	running bool       // whether the loop goroutine runs
	done    chan struct{}
}

// NewHub returns a Hub; an error names the HubConfig field at fault.
func NewHub(cfg HubConfig) (*Hub, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Hub{cfg: cfg, join: make(chan *Subscription, cfg.MaxSubscribers),
		leave: make(chan *Subscription, cfg.MaxSubscribers), wake: make(chan struct{}, 1),
		hist: newHistory(int(cfg.History/cfg.Interval)+1, cfg.Tally, cfg.Interval)}, nil
}

// Tally is the counts the Hub samples (HubConfig.Tally).
func (h *Hub) Tally() *Tally { return h.cfg.Tally }

// Start keeps the loop running until Stop, sampling the Tally every
// interval. Safe to call twice.
func (h *Hub) Start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kept = true
	h.runLocked()
}

// Stop undoes Start and waits, at most until ctx is done, for the loop to
// return; a loop with subscribers open returns once the last one closes.
func (h *Hub) Stop(ctx context.Context) error {
	h.mu.Lock()
	h.kept = false
	select {
	case h.wake <- struct{}{}:
	default:
	}
	h.mu.Unlock()
	return h.Wait(ctx)
}

// runLocked starts the loop unless it runs; h.mu is held.
func (h *Hub) runLocked() {
	if !h.running {
		h.running = true
		h.done = make(chan struct{})
		go h.loop(h.done)
	}
}

// Subscription is one dashboard's feed. Read C until done with it, then
// Close it.
type Subscription struct {
	// C receives an EventHistory first, then an EventSnapshot per interval.
	// A subscriber that falls behind misses snapshots (each one is whole).
	C <-chan Event

	c    chan Event
	hub  *Hub
	once sync.Once
}

// Subscribe opens a feed, or answers ErrFull.
func (h *Hub) Subscribe() (*Subscription, error) {
	c := make(chan Event, 4)
	s := &Subscription{C: c, c: c, hub: h}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count >= h.cfg.MaxSubscribers {
		return nil, ErrFull
	}
	h.count++
	h.runLocked()
	h.join <- s
	return s, nil
}

// Close ends the subscription. Safe to call twice.
func (s *Subscription) Close() {
	s.once.Do(func() {
		h := s.hub
		h.mu.Lock()
		h.count--
		h.leave <- s
		h.mu.Unlock()
	})
}

// Wait blocks until the loop goroutine, if one runs, has returned (after
// the last subscription closed) or ctx is done.
func (h *Hub) Wait(ctx context.Context) error {
	h.mu.Lock()
	done := h.done
	h.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop is the Hub's one goroutine: it owns subs, the last snapshot and the
// history, and returns once no subscription is open and Start is not in
// force.
func (h *Hub) loop(done chan struct{}) {
	defer close(done)
	ticker := time.NewTicker(h.cfg.Interval)
	defer ticker.Stop()
	subs := map[*Subscription]bool{}
	var last Event
	var lastAt time.Time
	// tick samples the Tally and, with read, the promotions too (Source).
	tick := func(read bool) {
		if !read {
			h.hist.add(time.Now(), nil)
			return
		}
		last, lastAt = h.take(last), time.Now()
		for s := range subs {
			s.send(last)
		}
	}
	for {
		select {
		case s := <-h.join:
			if lastAt.IsZero() || time.Since(lastAt) >= h.cfg.Interval {
				tick(true)
			}
			subs[s] = true
			s.send(Event{Name: EventHistory, Data: h.hist.marshal(h.cfg.Interval)})
			s.send(last)
		case s := <-h.leave:
			delete(subs, s)
		case <-ticker.C:
			tick(len(subs) > 0)
		case <-h.wake:
		}
		if len(subs) == 0 && h.stopIfIdle() {
			return
		}
	}
}

// stopIfIdle marks the loop stopped if no subscription is open and Start
// is not in force, draining the joins and leaves of subscriptions opened
// and closed meanwhile.
func (h *Hub) stopIfIdle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count > 0 || h.kept {
		return false
	}
	for len(h.join) > 0 {
		<-h.join
	}
	for len(h.leave) > 0 {
		<-h.leave
	}
	h.running = false
	return true
}

// send hands e to the subscriber unless its buffer is full.
func (s *Subscription) send(e Event) {
	if e.Data == nil {
		return
	}
	select {
	case s.c <- e:
	default:
	}
}

// take reads the promotions, records them with the Tally in the history
// (which adds the rates), and returns the snapshot event; on a failed
// read, the last one's promotions with the error.
func (h *Hub) take(last Event) Event {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.SourceTimeout)
	ps, err := h.cfg.Source(ctx)
	cancel()
	now := time.Now()
	snap := Snapshot{At: now.UTC(), Promotions: ps}
	if err != nil {
		h.cfg.Logger.Warn("dashboard snapshot failed", "err", err)
		h.hist.add(now, nil)
		var prev Snapshot
		if last.Data != nil {
			_ = json.Unmarshal(last.Data, &prev)
		}
		snap.Promotions, snap.Error = prev.Promotions, "the promotions could not be read: "+err.Error()
	} else {
		h.hist.add(now, snap.Promotions)
	}
	if snap.Promotions == nil {
		snap.Promotions = []Promotion{}
	}
	data, err := json.Marshal(snap)
	if err != nil {
		return last // cannot happen: plain data
	}
	return Event{Name: EventSnapshot, Data: data}
}
