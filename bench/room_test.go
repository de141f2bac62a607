package bench

import (
	"math"
	"testing"
	"time"
)

func TestAdmissionRate(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	// A room admitting 200/s in ticks of 100 ms, sampled every 50 ms: the
	// count stays at 0 for a second, climbs to 1,000 in 5 s, then stays.
	var samples []rateSample
	for ms := 0; ms <= 8000; ms += 50 {
		at := t0.Add(time.Duration(ms) * time.Millisecond)
		var n int64
		if ms >= 1000 {
			tick := (ms - 1000) / 100 * 100
			n = min(int64(tick)*200/1000, 1000)
		}
		samples = append(samples, rateSample{at: at, admitted: n})
	}
	rate, window, n := admissionRate(samples)
	if math.Abs(rate-200) > 200*0.05 || window < 4*time.Second || n < 80 {
		t.Fatalf("rate %.1f over %s from %d samples, want 200 ±5%% over ≥ 4 s", rate, window, n)
	}

	for _, tc := range []struct {
		name    string
		samples []rateSample
	}{
		{"none", nil},
		{"flat", []rateSample{{t0, 5}, {t0.Add(time.Second), 5}, {t0.Add(2 * time.Second), 5}}},
		{"one step", []rateSample{{t0, 0}, {t0.Add(time.Second), 10}, {t0.Add(2 * time.Second), 10}}},
	} {
		if rate, _, _ := admissionRate(tc.samples); rate != 0 {
			t.Errorf("%s: rate %v, want 0 (not measurable)", tc.name, rate)
		}
	}
}
