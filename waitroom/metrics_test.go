package waitroom

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/redistest"
)

// scrape gathers reg into "name{promotion} value" lines, one per series.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

func TestCollector(t *testing.T) {
	t.Parallel()
	eachTopology(t, func(t *testing.T, tp redistest.Topology) {
		f := setup(t, tp, 1000)
		f.open(t, Settings{AdmitPerSecond: 1000, OpensAt: later})
		reg := prometheus.NewRegistry()
		reg.MustRegister(NewCollector(f.rooms, 0, 0))

		users := f.join(t, 5)
		got := scrape(t, reg)
		if got["dibs_waitroom_waiting{p}"] != 5 || got["dibs_waitroom_admitted_total{p}"] != 0 {
			t.Fatalf("after 5 joins: %v", got)
		}
		f.startAdmission(t)
		_, tokens := f.admitUntil(t, 5)
		f.claimWith(t, users[0], tokens[users[0]])
		f.claimWith(t, users[1], tokens[users[1]])
		got = scrape(t, reg)
		for series, want := range map[string]float64{
			"dibs_waitroom_waiting{p}":              0,
			"dibs_waitroom_admitted_total{p}":       5,
			"dibs_waitroom_passes_spent_total{p}":   2,
			"dibs_waitroom_passes_expired_total{p}": 0,
			"dibs_waitroom_abandoned_total{p}":      0,
			"dibs_waitroom_metrics_errors_total{}":  0,
		} {
			if v, ok := got[series]; !ok || v != want {
				t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
			}
		}

		// An unregistered room (its promotion retired) is no longer
		// reported.
		if err := f.rooms.Unregister(t.Context(), f.id); err != nil {
			t.Fatal(err)
		}
		if got := scrape(t, reg); len(got) != 1 {
			t.Fatalf("after unregistering: %v, want only the error counter", got)
		}
	})
}

// With Redis gone a scrape still answers: the rooms are left out and the
// error is counted.
func TestCollectorRedisDown(t *testing.T) {
	t.Parallel()
	c, err := rueidis.NewClient(redistest.Topology{Addrs: []string{redistest.Single(t).Addr()}}.ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	rooms, err := New(c, Config{Prefix: redistest.Prefix(t), Keys: testKeys,
		Known: func() []Known { return []Known{{ID: "p"}} }})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(rooms, 0, 0))
	got := scrape(t, reg)
	if len(got) != 1 || got["dibs_waitroom_metrics_errors_total{}"] != 1 {
		t.Fatalf("scrape with Redis closed: %v", got)
	}
}
