package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/dibsio/dibs/events"
	"github.com/dibsio/dibs/store"
)

// EnvEventsSecretPrefix starts the environment variable that holds a
// webhook subscriber's secret: DIBS_EVENTS_SECRET_ and the subscriber's
// name in upper case, every character other than a letter or a digit made
// "_" (subscriber "crm-eu": DIBS_EVENTS_SECRET_CRM_EU). It wins over the
// file's secret.
const EnvEventsSecretPrefix = "DIBS_EVENTS_SECRET_"

// EventsStopTimeout bounds how long Stop waits for the deliveries in
// flight (and the release of their leases).
const EventsStopTimeout = 10 * time.Second

// EventsConfig is the `events:` section of the file: the webhook
// subscribers the outbox's events are delivered to, and the outbox's
// retention. Zero values keep the package events defaults.
type EventsConfig struct {
	// Subscribers receive every event (or the types they name), at least
	// once. Their secrets are best given in the environment (see
	// EnvEventsSecretPrefix).
	Subscribers []events.Subscriber `yaml:"subscribers"`
	// RetentionDays is how long events are kept once every subscriber was
	// delivered them; -1 keeps them for ever. Defaults to 7.
	RetentionDays int `yaml:"retention_days"`
	// TimeoutMS bounds one POST. Defaults to 5000.
	TimeoutMS int `yaml:"timeout_ms"`
	// MinBackoffMS and MaxBackoffMS bound the wait after a failed delivery.
	// Default to 500 and 30000.
	MinBackoffMS int `yaml:"min_backoff_ms"`
	MaxBackoffMS int `yaml:"max_backoff_ms"`
	// LeaseTTLMS is how soon another instance takes over the deliveries of
	// one that died. Defaults to 15000.
	LeaseTTLMS int `yaml:"lease_ttl_ms"`
}

// EventsSecretEnv is the environment variable of subscriber name's secret.
func EventsSecretEnv(name string) string {
	return EnvEventsSecretPrefix + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, name)
}

// applyEnv sets the subscribers' secrets found in the environment.
func (e *EventsConfig) applyEnv() {
	for i, s := range e.Subscribers {
		if v := os.Getenv(EventsSecretEnv(s.Name)); v != "" {
			e.Subscribers[i].Secret = v
		}
	}
}

// deliverConfig is the package events configuration of e.
func (e EventsConfig) deliverConfig(st store.EventLog, owner string, m *events.Metrics, log *slog.Logger) events.Config {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	c := events.Config{Store: st, Subscribers: e.Subscribers, Owner: owner, Metrics: m, Logger: log,
		Timeout: ms(e.TimeoutMS), MinBackoff: ms(e.MinBackoffMS), MaxBackoff: ms(e.MaxBackoffMS), LeaseTTL: ms(e.LeaseTTLMS)}
	switch {
	case e.RetentionDays < 0:
		c.Retention = -1
	case e.RetentionDays > 0:
		c.Retention = time.Duration(e.RetentionDays) * 24 * time.Hour
	}
	return c
}

// validate names the first key that cannot work.
func (e EventsConfig) validate() error {
	for _, v := range []struct {
		key string
		n   int
	}{{"timeout_ms", e.TimeoutMS}, {"min_backoff_ms", e.MinBackoffMS}, {"max_backoff_ms", e.MaxBackoffMS}, {"lease_ttl_ms", e.LeaseTTLMS}} {
		if v.n < 0 || v.n > 3_600_000 {
			return fmt.Errorf("events.%s must be 0..3600000, got %d", v.key, v.n)
		}
	}
	if e.RetentionDays < -1 || e.RetentionDays > 36_500 {
		return fmt.Errorf("events.retention_days must be -1..36500, got %d", e.RetentionDays)
	}
	// The rest is the deliverer's own check, with a stand-in store.
	if _, err := events.New(e.deliverConfig(noEventLog{}, "check", nil, slog.New(slog.DiscardHandler))); err != nil {
		return fmt.Errorf("%w (the secret may come from %s<NAME>)", err, EnvEventsSecretPrefix)
	}
	return nil
}

// noEventLog stands in for the store when the events configuration is
// checked without a database; nothing calls it.
type noEventLog struct{ store.EventLog }

// startEvents starts the delivery of the outbox's events to the
// subscribers, and its pruning; Stop stops it before the database closes.
func (s *Service) startEvents(st store.EventLog, m *events.Metrics) error {
	d, err := events.New(s.cfg.Events.deliverConfig(st, s.cfg.Instance+"/"+randomToken()[:8], m, s.log))
	if err != nil {
		return err
	}
	if err := d.Start(); err != nil {
		return err
	}
	s.closers = append(s.closers, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, EventsStopTimeout)
		defer cancel()
		if err := d.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("stopping event deliveries", "err", err)
		}
	})
	return nil
}
