package waitroom

import (
	"context"
	"errors"
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
// and dibs_waitroom_metrics_errors_total, the scrapes whose Redis reads
// failed (the rooms' series are then left out of that scrape rather than
// failing the whole scrape).
type Collector struct {
	rooms    *Rooms
	timeout  time.Duration
	maxRooms int
	errors   prometheus.Counter

	waiting, admitted, spent, expired, abandoned *prometheus.Desc
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
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.waiting, c.admitted, c.spent, c.expired, c.abandoned} {
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
	if len(known) > c.maxRooms {
		known = known[:c.maxRooms]
	}
	var errs []error
	for _, k := range known {
		id := k.ID
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
