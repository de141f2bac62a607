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
// everything but the rates, which the Hub computes from the snapshots it
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
	// Room is the waiting room's counts; nil without one.
	Room *Room `json:"waiting_room,omitempty"`
	// Consumers are the promotion's confirmation consumers by instance.
	Consumers []Consumers `json:"consumers"`

	// ClaimsPerSecond is the rate of accepted claims since the last
	// snapshot. Set by the Hub.
	ClaimsPerSecond float64 `json:"claims_per_second"`
	// IssueLagSeconds is how long ago the oldest claim not yet issued (nor
	// dead-lettered) was accepted, as far as the snapshots tell: 0 when
	// every accepted claim is settled. Set by the Hub.
	IssueLagSeconds float64 `json:"issue_lag_seconds"`
}

// Room is a waiting room's counts.
type Room struct {
	Waiting        int64 `json:"waiting"`
	Admitted       int64 `json:"admitted"`
	AdmitPerSecond int   `json:"admit_per_second"`
	// AdmittedPerSecond is the measured admission rate since the last
	// snapshot. Set by the Hub.
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
	// EventHistory carries the rates of the last HubConfig.History, per
	// promotion: {"interval_ms": N, "series": {"<id>": [[unix_ms,
	// claims_per_second, issue_lag_seconds, admitted_per_second], ...]}}.
	// It is a subscription's first event.
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

// Hub takes one snapshot of every promotion per interval and fans it out
// to every subscribed dashboard, however many there are: N dashboards cost
// one read of the promotions per interval, not N.
//
// Its loop goroutine runs only while someone subscribes: the first
// Subscribe starts it, and it returns once the last subscription is closed.
// The loop owns the subscriber set, the last snapshot and the history of
// rates; Subscribe and Close talk to it over channels.
type Hub struct {
	cfg HubConfig
	// join and leave carry subscriptions to the loop; each holds up to
	// MaxSubscribers, so sends under mu never block.
	join, leave chan *Subscription

	mu      sync.Mutex // guards count and running, and orders sends on join and leave
	count   int        // open subscriptions
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
		leave: make(chan *Subscription, cfg.MaxSubscribers)}, nil
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
	if !h.running {
		h.running = true
		h.done = make(chan struct{})
		go h.loop(h.done)
	}
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
// history, and returns once no subscription is open.
func (h *Hub) loop(done chan struct{}) {
	defer close(done)
	ticker := time.NewTicker(h.cfg.Interval)
	defer ticker.Stop()
	subs := map[*Subscription]bool{}
	hist := newHistory(int(h.cfg.History / h.cfg.Interval))
	var last Event
	var lastAt time.Time
	tick := func() {
		last, lastAt = h.take(hist, last), time.Now()
		for s := range subs {
			s.send(last)
		}
	}
	for {
		select {
		case s := <-h.join:
			if lastAt.IsZero() || time.Since(lastAt) >= h.cfg.Interval {
				tick()
			}
			subs[s] = true
			s.send(Event{Name: EventHistory, Data: hist.marshal(h.cfg.Interval)})
			s.send(last)
		case s := <-h.leave:
			delete(subs, s)
		case <-ticker.C:
			tick()
		}
		if len(subs) == 0 && h.stopIfIdle() {
			return
		}
	}
}

// stopIfIdle marks the loop stopped if no subscription is open, draining
// the joins and leaves of subscriptions opened and closed meanwhile.
func (h *Hub) stopIfIdle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count > 0 {
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

// take reads the promotions, adds the rates from hist, and returns the
// snapshot event; on a failed read, the last one's promotions with the
// error.
func (h *Hub) take(hist *history, last Event) Event {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.SourceTimeout)
	ps, err := h.cfg.Source(ctx)
	cancel()
	now := time.Now()
	snap := Snapshot{At: now.UTC(), Promotions: ps}
	if err != nil {
		h.cfg.Logger.Warn("dashboard snapshot failed", "err", err)
		var prev Snapshot
		if last.Data != nil {
			_ = json.Unmarshal(last.Data, &prev)
		}
		snap.Promotions, snap.Error = prev.Promotions, "the promotions could not be read: "+err.Error()
	} else {
		hist.add(now, snap.Promotions)
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
