package promotion_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/promotion"
)

// TestDrainedPromotionSeriesAreDropped: once a promotion is drained, its
// pending, oldest pending, remaining and halt gauges, its count of claims
// put back and every series of its stream leave /metrics; other
// promotions' series stay.
func TestDrainedPromotionSeriesAreDropped(t *testing.T) {
	t.Parallel()
	const prefix = "m:"
	reg := prometheus.NewRegistry()
	m := promotion.NewMetrics(reg, prefix)
	hooks := m.StreamHooks()
	for _, id := range []string{"gone", "kept"} {
		s := claim.KeysFor(prefix, id).Stream()
		m.Backlog(id, 3)
		m.Remaining(id, 5)
		m.Handling(id, "k/c-1", promotion.Handling{Oldest: time.Now()})
		m.Halted(id, id == "gone")
		m.Requeued(id, 2)
		m.JournalDropped(id, 1)
		m.Issued(id, 2)
		m.DeadLetter(id)
		hooks.Read(s, 0)
		hooks.Read(s, 2)
		hooks.Ack(s, 2)
		hooks.Failure(s, "transient")
		hooks.DeadLetter(s, "x")
		hooks.Consumers(s, 1)
		hooks.Lag(s, 0, 1)
	}
	m.Drained("gone")

	text := exposition(t, reg)
	gone := claim.KeysFor(prefix, "gone").Stream()
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, `"gone"`) || strings.Contains(line, `"`+gone+`"`) {
			t.Errorf("a drained promotion's series is still exported: %s", line)
		}
		if strings.Contains(line, `stream=`) || strings.Contains(line, prefix+"{") {
			t.Errorf("a series is labelled with a Redis key, not the promotion: %s", line)
		}
	}
	for _, name := range []string{
		"dibs_pending_claims", "dibs_remaining", "dibs_oldest_pending_seconds", "dibs_promotion_halted", "dibs_claims_requeued_total", "dibs_stream_reads_total", "dibs_stream_messages_total", "dibs_stream_acks_total",
		"dibs_stream_failures_total", "dibs_stream_dead_letters_total", "dibs_stream_consumers",
		"dibs_stream_lag", "dibs_stream_pending",
	} {
		label := `promotion="kept"`
		found := false
		for _, line := range strings.Split(text, "\n") {
			found = found || strings.HasPrefix(line, name+"{") && strings.Contains(line, label)
		}
		if !found {
			t.Errorf("%s of the other promotion is missing:\n%s", name, text)
		}
	}
	// The totals are not per promotion: they stay.
	for _, want := range []string{"dibs_issued_total 4\n", "dibs_dead_letters_total 2\n", "dibs_journal_dropped_total 2\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, text)
		}
	}
}

// TestRemainingAfterDrain: the remaining gauge a claim's answer sets is
// held per promotion while the promotion has it; a drained promotion's is
// dropped with its series, and a later answer of the promotion exports it
// again.
func TestRemainingAfterDrain(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := promotion.NewMetrics(reg, "m:")
	m.Remaining("p", 5)
	m.Remaining("q", 9)
	m.Remaining("p", 4)
	if n := promotion.RemainingCached(m); n != 2 {
		t.Fatalf("%d remaining gauges held, want 2", n)
	}
	m.Drained("p")
	if n := promotion.RemainingCached(m); n != 1 {
		t.Fatalf("%d remaining gauges held after a drain, want 1", n)
	}
	if text := exposition(t, reg); strings.Contains(text, `dibs_remaining{promotion="p"}`) ||
		!strings.Contains(text, `dibs_remaining{promotion="q"} 9`+"\n") {
		t.Fatalf("after p drained:\n%s", text)
	}
	m.Remaining("p", 3)
	if text := exposition(t, reg); !strings.Contains(text, `dibs_remaining{promotion="p"} 3`+"\n") {
		t.Fatalf("p answered again after its drain:\n%s", text)
	}
}

// BenchmarkRemaining is the OnRemaining hook as every accepted claim calls
// it, from parallel requests.
func BenchmarkRemaining(b *testing.B) {
	m := promotion.NewMetrics(prometheus.NewRegistry(), "m:")
	for _, id := range []string{"a", "b", "c", "bench"} {
		m.Remaining(id, 1)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		n := int64(0)
		for pb.Next() {
			n++
			m.Remaining("bench", n)
		}
	})
}

// exposition is what /metrics serves for g.
func exposition(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}
