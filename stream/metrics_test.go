package stream_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dibsio/dibs/stream"
)

// TestMetricsHooks: each hook feeds its series, labelled by stream, a lag
// Redis cannot tell is no series rather than -1, and Forget drops one
// stream's series and no other's.
func TestMetricsHooks(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := stream.NewMetrics(reg)
	h := m.Hooks()
	for _, s := range []string{"a", "b"} {
		h.Read(s, 0)
		h.Read(s, 3)
		h.Ack(s, 3)
		h.Failure(s, stream.FailureTransient)
		h.DeadLetter(s, "reason")
		h.Consumers(s, 2)
		h.Lag(s, -1, 4)
	}
	want := `# HELP dibs_stream_acks_total Entries acknowledged after handling.
# TYPE dibs_stream_acks_total counter
dibs_stream_acks_total{stream="a"} 3
# HELP dibs_stream_consumers Consumers running in this process.
# TYPE dibs_stream_consumers gauge
dibs_stream_consumers{stream="a"} 2
# HELP dibs_stream_dead_letters_total Entries written to a dead-letter stream.
# TYPE dibs_stream_dead_letters_total counter
dibs_stream_dead_letters_total{stream="a"} 1
# HELP dibs_stream_failures_total Handler and runtime failures, by kind.
# TYPE dibs_stream_failures_total counter
dibs_stream_failures_total{kind="transient",stream="a"} 1
# HELP dibs_stream_messages_total Entries read from work streams.
# TYPE dibs_stream_messages_total counter
dibs_stream_messages_total{stream="a"} 3
# HELP dibs_stream_pending Entries delivered but not acknowledged.
# TYPE dibs_stream_pending gauge
dibs_stream_pending{stream="a"} 4
# HELP dibs_stream_reads_total XREADGROUP calls, by whether they returned entries.
# TYPE dibs_stream_reads_total counter
dibs_stream_reads_total{result="empty",stream="a"} 1
dibs_stream_reads_total{result="entries",stream="a"} 1
`
	m.Forget("b")
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if got := rec.Body.String(); got != want {
		t.Fatalf("/metrics:\n%s\nwant:\n%s", got, want)
	}
}

// TestMetricsByName: NewMetricsBy labels the series with the name it makes
// of the stream key, a known lag replaces an unknown one and back, and
// Forget takes the stream key.
func TestMetricsByName(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := stream.NewMetricsBy(reg, "promotion", func(s string) string { return strings.TrimSuffix(s, ":claims") })
	h := m.Hooks()
	h.Lag("p1:claims", 5, 1)
	h.Lag("p2:claims", 7, 0)
	if got := gather(t, reg); !strings.Contains(got, `dibs_stream_lag{promotion="p1"} 5`) || strings.Contains(got, "claims") {
		t.Fatalf("want the lag labelled by name:\n%s", got)
	}
	h.Lag("p1:claims", -1, 2)
	got := gather(t, reg)
	if strings.Contains(got, `dibs_stream_lag{promotion="p1"}`) || !strings.Contains(got, `dibs_stream_pending{promotion="p1"} 2`) {
		t.Fatalf("an unknown lag must drop the lag series and keep pending:\n%s", got)
	}
	m.Forget("p2:claims")
	if got := gather(t, reg); strings.Contains(got, "p2") {
		t.Fatalf("Forget left series of the stream:\n%s", got)
	}
}

func gather(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}
