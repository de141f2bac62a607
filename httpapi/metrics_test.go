package httpapi

import (
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestMetricsChildrenCached: requests and claims counted from many
// goroutines at once, over label sets first seen concurrently, land in the
// same series as the vectors' own lookups, each made once.
func TestMetricsChildrenCached(t *testing.T) {
	t.Parallel()
	m := NewMetrics(prometheus.NewRegistry())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				m.request("POST /v1/promotions/{id}/claims", 200+i%4, 0.001)
				m.claim([]string{"accepted", "replayed", CodeSoldOut}[(g+i)%3])
			}
		})
	}
	wg.Wait()
	for code := 200; code < 204; code++ {
		if got := counted(t, m.Requests.WithLabelValues("POST /v1/promotions/{id}/claims", strconv.Itoa(code))); got != 200 {
			t.Errorf("code %d: %v requests, want 200", code, got)
		}
	}
	total := 0.0
	for _, o := range []string{"accepted", "replayed", CodeSoldOut} {
		total += counted(t, m.Claims.WithLabelValues(o))
	}
	if total != 800 {
		t.Errorf("%v claims counted, want 800", total)
	}
	if n := len(*m.requests.m.Load()); n != 4 {
		t.Errorf("%d request series cached, want 4", n)
	}
	if n := len(*m.outcomes.m.Load()); n != 3 {
		t.Errorf("%d outcomes cached, want 3", n)
	}
}

// counted is the value of counter c.
func counted(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}
