package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dibsio/dibs/stream"
)

// streamHooks exports the stream runtime's activity to Prometheus. Streams
// are labelled by key; there is one per promotion.
func streamHooks(reg prometheus.Registerer) stream.Hooks {
	reads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dibs_stream_reads_total", Help: "XREADGROUP calls, by whether they returned entries.",
	}, []string{"stream", "result"})
	messages := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dibs_stream_messages_total", Help: "Entries read from work streams.",
	}, []string{"stream"})
	acks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dibs_stream_acks_total", Help: "Entries acknowledged after handling.",
	}, []string{"stream"})
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dibs_stream_failures_total", Help: "Handler and runtime failures, by kind.",
	}, []string{"stream", "kind"})
	dead := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dibs_stream_dead_letters_total", Help: "Entries written to a dead-letter stream.",
	}, []string{"stream"})
	consumers := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dibs_stream_consumers", Help: "Consumers running in this process, by stream.",
	}, []string{"stream"})
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dibs_stream_lag", Help: "Entries not yet delivered to the group (-1: unknown).",
	}, []string{"stream"})
	pending := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dibs_stream_pending", Help: "Entries delivered but not acknowledged.",
	}, []string{"stream"})
	reg.MustRegister(reads, messages, acks, failures, dead, consumers, lag, pending)
	return stream.Hooks{
		Read: func(s string, n int) {
			if n == 0 {
				reads.WithLabelValues(s, "empty").Inc()
				return
			}
			reads.WithLabelValues(s, "entries").Inc()
			messages.WithLabelValues(s).Add(float64(n))
		},
		Ack:        func(s string, n int) { acks.WithLabelValues(s).Add(float64(n)) },
		Failure:    func(s, kind string) { failures.WithLabelValues(s, kind).Inc() },
		DeadLetter: func(s, _ string) { dead.WithLabelValues(s).Inc() },
		Consumers:  func(s string, n int) { consumers.WithLabelValues(s).Set(float64(n)) },
		Lag: func(s string, l, p int64) {
			lag.WithLabelValues(s).Set(float64(l))
			pending.WithLabelValues(s).Set(float64(p))
		},
	}
}
