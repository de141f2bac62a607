package stream_test

import (
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dibsio/dibs/stream"
)

// TestMetricsHooks: each hook feeds its series, labelled by stream, and
// Forget drops one stream's series and no other's.
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
# HELP dibs_stream_consumers Consumers running in this process, by stream.
# TYPE dibs_stream_consumers gauge
dibs_stream_consumers{stream="a"} 2
# HELP dibs_stream_dead_letters_total Entries written to a dead-letter stream.
# TYPE dibs_stream_dead_letters_total counter
dibs_stream_dead_letters_total{stream="a"} 1
# HELP dibs_stream_failures_total Handler and runtime failures, by kind.
# TYPE dibs_stream_failures_total counter
dibs_stream_failures_total{kind="transient",stream="a"} 1
# HELP dibs_stream_lag Entries not yet delivered to the group (-1: unknown).
# TYPE dibs_stream_lag gauge
dibs_stream_lag{stream="a"} -1
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
