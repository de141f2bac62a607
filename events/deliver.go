package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/dibsio/dibs/internal/startstop"
	"github.com/dibsio/dibs/store"
)

// Defaults of Config.
const (
	DefaultTimeout      = 5 * time.Second
	DefaultBatchSize    = 100
	DefaultPollInterval = time.Second
	DefaultLeaseTTL     = 15 * time.Second
	DefaultMinBackoff   = 500 * time.Millisecond
	DefaultMaxBackoff   = 30 * time.Second
	DefaultRetention    = 7 * 24 * time.Hour
	// MaxRetryAfter bounds how long a subscriber's Retry-After holds its
	// deliveries back.
	MaxRetryAfter = 10 * time.Minute
	// pruneEvery is how often the outbox is pruned; pruneBatch bounds one
	// DELETE.
	pruneEvery = time.Hour
	pruneBatch = 10_000
)

// Subscriber is one webhook receiver.
type Subscriber struct {
	// Name identifies the subscriber: its cursor, its lease and its
	// metrics' label. Required, unique; keep it when the URL changes.
	Name string `yaml:"name"`
	// URL receives the POSTs: http or https. Required.
	URL string `yaml:"url"`
	// Secret signs the deliveries (Dibs-Signature). Required.
	Secret string `yaml:"secret"`
	// Types are the event types delivered; empty for all.
	Types []string `yaml:"types"`
}

// Validate names the first field that cannot work.
func (s Subscriber) Validate() error {
	if s.Name == "" || len(s.Name) > 100 {
		return errors.New("name must be 1 to 100 characters")
	}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("subscriber %s: url must be an http or https URL", s.Name)
	}
	if len(s.Secret) < 16 {
		return fmt.Errorf("subscriber %s: secret must be at least 16 characters", s.Name)
	}
	for _, t := range s.Types {
		if !KnownType(t) {
			return fmt.Errorf("subscriber %s: unknown event type %q (want one of %v)", s.Name, t, store.EventTypes)
		}
	}
	return nil
}

// Config configures a Deliverer.
type Config struct {
	// Store holds the outbox, the cursors and the leases. Required.
	Store store.EventLog
	// Subscribers receive the events.
	Subscribers []Subscriber
	// Owner names this instance in the leases; unique per live process.
	// Required.
	Owner string
	// Client sends the POSTs. Defaults to a client without redirects.
	Client *http.Client
	// Timeout bounds one POST. Defaults to DefaultTimeout; at most half of
	// LeaseTTL.
	Timeout time.Duration
	// BatchSize is how many events one read of the feed takes. Defaults to
	// DefaultBatchSize.
	BatchSize int
	// PollInterval is how often the feed is read once a subscriber is
	// caught up, and how often an instance without the lease tries to
	// take it. Defaults to DefaultPollInterval.
	PollInterval time.Duration
	// LeaseTTL is how long a subscriber's lease lasts unless renewed: how
	// soon another instance takes over from one killed. Defaults to
	// DefaultLeaseTTL.
	LeaseTTL time.Duration
	// MinBackoff and MaxBackoff bound the wait after a failed delivery,
	// doubled per failure in a row, with jitter. Default to
	// DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Retention is how long events are kept once every subscriber was
	// delivered them; negative keeps them for ever. Defaults to
	// DefaultRetention.
	Retention time.Duration
	// Metrics receives the delivery metrics; nil for none.
	Metrics *Metrics
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Client == nil {
		c.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("events: Config.Store is required")
	case c.Owner == "":
		return errors.New("events: Config.Owner is required")
	case c.Timeout < 0 || c.BatchSize < 0 || c.PollInterval < 0 || c.LeaseTTL < 0 || c.MinBackoff < 0 || c.MaxBackoff < 0:
		return errors.New("events: durations and sizes must not be negative")
	case c.Timeout > c.LeaseTTL/2:
		return fmt.Errorf("events: Config.Timeout %s must be at most half of LeaseTTL %s", c.Timeout, c.LeaseTTL)
	case c.MinBackoff > c.MaxBackoff:
		return errors.New("events: Config.MinBackoff must not exceed MaxBackoff")
	}
	names := map[string]bool{}
	for _, s := range c.Subscribers {
		if err := s.Validate(); err != nil {
			return fmt.Errorf("events: %w", err)
		}
		if names[s.Name] {
			return fmt.Errorf("events: subscriber name %q appears twice", s.Name)
		}
		names[s.Name] = true
	}
	return nil
}

// Deliverer delivers the outbox's events to the subscribers. Start it once;
// Stop releases its leases, so another instance takes over at once.
type Deliverer struct {
	cfg  Config
	log  *slog.Logger
	life startstop.Base
}

// New checks cfg and returns a Deliverer, not started.
func New(cfg Config) (*Deliverer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Deliverer{cfg: cfg, log: cfg.Logger}, nil
}

// Start runs one delivering goroutine per subscriber, and the pruning.
func (d *Deliverer) Start() error { return d.life.Start(d.run) }

// Stop stops the deliveries and waits for them, or for ctx.
func (d *Deliverer) Stop(ctx context.Context) error { return d.life.Stop(ctx) }

func (d *Deliverer) run(stopping <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range d.cfg.Subscribers {
		wg.Go(func() { d.newSub(s).serve(ctx) })
	}
	if d.cfg.Retention > 0 {
		wg.Go(func() { d.prune(ctx) })
	}
	<-stopping
	cancel()
	wg.Wait()
}

// prune deletes, every pruneEvery, the events older than the retention
// that every subscriber was delivered. Any instance may: a DELETE done twice
// deletes nothing more.
func (d *Deliverer) prune(ctx context.Context) {
	names := make([]string, len(d.cfg.Subscribers))
	for i, s := range d.cfg.Subscribers {
		names[i] = s.Name
	}
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := d.cfg.Store.PruneEvents(ctx, time.Now().Add(-d.cfg.Retention), names, pruneBatch)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("cannot prune the outbox; retrying later", "err", err)
		}
		if d.cfg.Metrics != nil {
			d.cfg.Metrics.pruned.Add(float64(n))
		}
	}
}

// sub is one subscriber's delivery; its goroutine owns every field.
type sub struct {
	d      *Deliverer
	s      Subscriber
	secret []byte

	held    bool      // the lease is ours
	renewAt time.Time // when to renew it
	seq     int64     // the cursor: every event up to it was delivered
	fails   int       // deliveries failed in a row
	retryAt time.Time // no delivery before
}

func (d *Deliverer) newSub(s Subscriber) *sub {
	if m := d.cfg.Metrics; m != nil { // every series from the start, at 0
		m.delivered.WithLabelValues(s.Name)
		m.failed.WithLabelValues(s.Name)
		m.lag.WithLabelValues(s.Name)
		m.leader.WithLabelValues(s.Name)
	}
	return &sub{d: d, s: s, secret: []byte(s.Secret)}
}

// serve delivers until ctx ends, then releases the lease.
func (u *sub) serve(ctx context.Context) {
	defer func() {
		if !u.held {
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), u.d.cfg.Timeout)
		defer cancel()
		if err := u.d.cfg.Store.ReleaseEvents(rctx, u.s.Name, u.d.cfg.Owner); err != nil {
			u.d.log.Warn("cannot release the lease of event deliveries; another instance takes over once it runs out",
				"subscriber", u.s.Name, "err", err)
		}
		u.setLeader(false)
	}()
	for ctx.Err() == nil {
		if wait := u.step(ctx); wait > 0 {
			sleep(ctx, wait)
		}
	}
}

// step does the next thing and returns how long to wait before the one
// after: keep the lease, then deliver a page of events past the cursor.
func (u *sub) step(ctx context.Context) time.Duration {
	cfg := u.d.cfg
	now := time.Now()
	if (!u.held || !now.Before(u.renewAt)) && !u.lease(ctx, now) {
		return cfg.PollInterval
	}
	if now.Before(u.retryAt) {
		return min(u.retryAt.Sub(now), u.renewAt.Sub(now))
	}
	evs, err := cfg.Store.Events(ctx, u.seq, u.s.Types, cfg.BatchSize)
	if err != nil {
		if ctx.Err() == nil {
			u.d.log.Warn("cannot read the events", "subscriber", u.s.Name, "err", err)
		}
		return cfg.PollInterval
	}
	u.measureLag(ctx)
	if len(evs) == 0 {
		return min(cfg.PollInterval, time.Until(u.renewAt))
	}
	u.advance(ctx, u.deliver(ctx, evs))
	return 0
}

// lease takes or renews the lease at now; false when it is not ours. A
// lease newly taken starts from the stored cursor with no failures.
func (u *sub) lease(ctx context.Context, now time.Time) bool {
	cfg := u.d.cfg
	seq, ok, err := cfg.Store.LeaseEvents(ctx, u.s.Name, cfg.Owner, cfg.LeaseTTL)
	if err != nil {
		if ctx.Err() == nil {
			u.d.log.Warn("cannot take the lease of event deliveries", "subscriber", u.s.Name, "err", err)
		}
		u.lose()
		return false
	}
	if !ok {
		u.lose()
		return false
	}
	if !u.held {
		u.seq, u.fails, u.retryAt = seq, 0, time.Time{}
		u.setLeader(true)
	}
	u.held, u.renewAt = true, now.Add(cfg.LeaseTTL/3)
	return true
}

// deliver posts evs in order until one fails, ctx ends or the lease is due
// for renewal, and returns the seq of the last one delivered (u.seq for
// none).
func (u *sub) deliver(ctx context.Context, evs []store.Event) int64 {
	delivered := u.seq
	for _, e := range evs {
		if ctx.Err() != nil || !time.Now().Before(u.renewAt) {
			break // the rest after the renewal
		}
		retryAfter, err := u.post(ctx, e)
		if err != nil {
			if ctx.Err() == nil {
				u.fail(e, retryAfter, err)
			}
			break
		}
		u.fails, delivered = 0, e.Seq
		if m := u.d.cfg.Metrics; m != nil {
			m.delivered.WithLabelValues(u.s.Name).Inc()
		}
	}
	return delivered
}

// fail holds the deliveries back after e failed: a backoff growing with
// the failures in a row, at least the Retry-After the subscriber asked for
// (bounded by MaxRetryAfter).
func (u *sub) fail(e store.Event, retryAfter time.Duration, err error) {
	cfg := u.d.cfg
	u.fails++
	wait := backoff(cfg.MinBackoff, cfg.MaxBackoff, u.fails)
	if retryAfter > 0 {
		wait = max(wait, min(retryAfter, MaxRetryAfter))
	}
	u.retryAt = time.Now().Add(wait)
	u.d.log.Info("event delivery failed; retrying", "subscriber", u.s.Name, "event", e.ID,
		"failures", u.fails, "retry_in", wait, "err", err)
	if m := cfg.Metrics; m != nil {
		m.failed.WithLabelValues(u.s.Name).Inc()
	}
}

// advance moves the cursor to delivered, if past it. Every event of the
// page up to it was read past, delivered or skipped by type.
func (u *sub) advance(ctx context.Context, delivered int64) {
	if delivered <= u.seq {
		return
	}
	cfg := u.d.cfg
	// Progress made is kept even when ctx ends meanwhile.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Timeout)
	ok, err := cfg.Store.SetEventCursor(sctx, u.s.Name, cfg.Owner, delivered)
	cancel()
	switch {
	case err != nil:
		// The events go again after the next renewal: at least once.
		u.d.log.Warn("cannot move the event cursor", "subscriber", u.s.Name, "err", err)
	case !ok:
		u.d.log.Warn("lost the lease of event deliveries", "subscriber", u.s.Name)
		u.lose()
	default:
		u.seq = delivered
	}
}

// lose forgets the lease.
func (u *sub) lose() {
	if u.held {
		u.setLeader(false)
	}
	u.held = false
}

func (u *sub) setLeader(on bool) {
	if m := u.d.cfg.Metrics; m != nil {
		v := 0.0
		if on {
			v = 1
		}
		m.leader.WithLabelValues(u.s.Name).Set(v)
	}
}

func (u *sub) measureLag(ctx context.Context) {
	m := u.d.cfg.Metrics
	if m == nil {
		return
	}
	if head, err := u.d.cfg.Store.EventHead(ctx); err == nil {
		m.lag.WithLabelValues(u.s.Name).Set(float64(max(head-u.seq, 0)))
	}
}

// post sends one event; an error if the subscriber did not answer a 2xx,
// with the Retry-After it asked for, if any.
func (u *sub) post(ctx context.Context, e store.Event) (time.Duration, error) {
	body, err := json.Marshal(FromStore(e))
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, u.d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.s.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "dibs-events")
	req.Header.Set(HeaderEventID, e.ID)
	req.Header.Set(HeaderEventType, e.Type)
	req.Header.Set(HeaderSignature, Sign(u.secret, time.Now(), body))
	resp, err := u.d.cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return 0, nil
	}
	return retryAfter(resp.Header.Get("Retry-After"), time.Now()), fmt.Errorf("answered %s", resp.Status)
}

// retryAfter reads a Retry-After value: seconds or an HTTP date; 0 for
// none or one that cannot be read.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// backoff is the wait after the n-th failure in a row: lo doubled n-1
// times, at most hi, less up to half of it at random (jitter, so
// subscribers that failed together do not retry together).
func backoff(lo, hi time.Duration, n int) time.Duration {
	d := hi
	if n < 32 {
		d = min(lo<<(n-1), hi)
	}
	if d <= 0 {
		return 0
	}
	return d - rand.N(d/2+1)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
