package waitroom

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/testkit/redistest"
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

// TestCollectorChallenges: each way a join's proof of work is checked is
// counted under its outcome, with the challenges handed out; the series
// are this instance's, and go with the room once it is no longer known.
func TestCollectorChallenges(t *testing.T) {
	t.Parallel()
	f := setup(t, redistest.Topologies(t)[0], 10)
	ctx := t.Context()
	now := time.Now()
	var late atomic.Bool
	var known atomic.Bool
	known.Store(true)
	rooms, err := New(f.c, Config{Prefix: f.prefix, Keys: testKeys,
		Now: func() time.Time {
			if late.Load() {
				return now.Add(ChallengeTTL + time.Second)
			}
			return now
		},
		Known: func() []Known {
			if known.Load() {
				return f.known()
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	f.rooms = rooms
	f.open(t, Settings{AdmitPerSecond: 10, PowDifficulty: 4, OpensAt: later})
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(rooms, 0, 0))
	if got := scrape(t, reg); len(got) != 6 {
		t.Fatalf("before any join: %v, want no challenge series", got)
	}

	fresh := func(user string) *ChallengeError { // missing
		t.Helper()
		_, err := rooms.JoinWithProof(ctx, f.id, user, Proof{}, 4)
		return challenged(t, err, ErrProofMissing, 4)
	}
	ce := fresh("u1")
	proof := Proof{ce.Challenge, solve(t, ce.Challenge, 4)}
	if _, err := rooms.JoinWithProof(ctx, f.id, "u1", proof, 4); err != nil { // solved
		t.Fatal(err)
	}
	_, err = rooms.JoinWithProof(ctx, f.id, "u1", proof, 4) // reused
	challenged(t, err, ErrProofSpent, 4)
	_, err = rooms.JoinWithProof(ctx, f.id, "u2", proof, 4) // wrong_user
	challenged(t, err, ErrProofNotYours, 4)
	_, err = rooms.JoinWithProof(ctx, f.id, "u2", Proof{"AAAA" + ce.Challenge, proof.Nonce}, 4) // forged
	challenged(t, err, ErrProofForged, 4)
	ce = fresh("u2")
	bad := "x"
	for Solved(ce.Challenge, bad, 4) {
		bad += "x"
	}
	_, err = rooms.JoinWithProof(ctx, f.id, "u2", Proof{ce.Challenge, bad}, 4) // unsolved
	challenged(t, err, ErrProofUnsolved, 4)
	_, err = rooms.JoinWithProof(ctx, f.id, "u2", Proof{ce.Challenge, solve(t, ce.Challenge, 4)}, 6) // too_easy
	challenged(t, err, ErrProofTooEasy, 6)
	late.Store(true)
	_, err = rooms.JoinWithProof(ctx, f.id, "u2", Proof{ce.Challenge, solve(t, ce.Challenge, 4)}, 4) // expired
	challenged(t, err, ErrProofExpired, 4)

	got := scrape(t, reg)
	for outcome, want := range map[string]float64{"issued": 8, "solved": 1, "missing": 2, "forged": 1,
		"wrong_user": 1, "expired": 1, "unsolved": 1, "too_easy": 1, "reused": 1} {
		series := "dibs_waitroom_challenges_total{" + outcome + ",p}" // labels by name
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}

	// A room no longer known loses its series, and its counts.
	known.Store(false)
	if got := scrape(t, reg); len(got) != 1 {
		t.Fatalf("with the room no longer known: %v, want only the error counter", got)
	}
	known.Store(true)
	if got := scrape(t, reg); got["dibs_waitroom_challenges_total{issued,p}"] != 0 {
		t.Fatalf("known again: %v, want the counts started over", got)
	}
}
