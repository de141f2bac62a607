package httpapi

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus metrics of the API's requests. The
// confirmation path's are promotion.Metrics.
type Metrics struct {
	// Claims counts claim requests by outcome (accepted, replayed, or a problem code).
	Claims *prometheus.CounterVec
	// ClaimSeconds is the latency of claim requests.
	ClaimSeconds prometheus.Histogram
	// Shed counts requests refused with overloaded.
	Shed prometheus.Counter
	// SSEStreams is the server-sent event streams of waiting-room standings
	// open.
	SSEStreams prometheus.Gauge
	// Joins counts joins of waiting rooms answered with a standing. It has
	// no promotion label: its series would outlive their promotions.
	Joins prometheus.Counter
	// PositionLookups counts waiting-room standings read for a user's
	// request, by form: json (one answer) or stream (the first event of a
	// stream; its later events are pushed).
	PositionLookups *prometheus.CounterVec
	// Requests counts HTTP requests by route — the pattern that matched,
	// such as "POST /v1/promotions/{id}/claims", or RouteUnmatched — and
	// status code. Both label sets are bounded: the routes are the API's,
	// whatever the paths asked for.
	Requests *prometheus.CounterVec
	// RequestSeconds is the time from a request's arrival to the end of its
	// answer, by route; a stream of server-sent events counts its whole
	// life.
	RequestSeconds *prometheus.HistogramVec

	// The children of Claims, Requests and RequestSeconds, looked up once
	// per label set: a request then hashes no label values.
	outcomes children[string, prometheus.Counter]
	requests children[requestLabels, requestSeries]
}

// requestLabels are the labels of one route's answers of one status code.
type requestLabels struct {
	route string
	code  int
}

// requestSeries are the children of Requests and RequestSeconds of one
// requestLabels.
type requestSeries struct {
	count   prometheus.Counter
	seconds prometheus.Observer
}

// children caches the children of a metric vector by their labels. Readers
// take no lock: they read a map that is never written, replaced whole by
// a writer that adds a key. The keys are bounded (routes, status codes,
// outcomes), so the copies stop early.
type children[K comparable, V any] struct {
	mu sync.Mutex              // held by writers only
	m  atomic.Pointer[map[K]V] // read by any goroutine; replaced under mu
}

// get returns the child of k, made by mk the first time.
func (c *children[K, V]) get(k K, mk func() V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[K]V
	if m := c.m.Load(); m != nil {
		old = *m
	}
	if v, ok := old[k]; ok {
		return v
	}
	next := make(map[K]V, len(old)+1)
	for ck, cv := range old {
		next[ck] = cv
	}
	v := mk()
	next[k] = v
	c.m.Store(&next)
	return v
}

// claim counts one claim request answered with outcome.
func (m *Metrics) claim(outcome string) {
	m.outcomes.get(outcome, func() prometheus.Counter { return m.Claims.WithLabelValues(outcome) }).Inc()
}

// RouteUnmatched is the route label of a request that matched no
// endpoint (answered 404 not_found).
const RouteUnmatched = "unmatched"

// request counts one answered request.
func (m *Metrics) request(route string, code int, seconds float64) {
	rs := m.requests.get(requestLabels{route, code}, func() requestSeries {
		return requestSeries{
			count:   m.Requests.WithLabelValues(route, strconv.Itoa(code)),
			seconds: m.RequestSeconds.WithLabelValues(route),
		}
	})
	rs.count.Inc()
	rs.seconds.Observe(seconds)
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_claims_total", Help: "Claim requests by outcome.",
		}, []string{"outcome"}),
		ClaimSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dibs_claim_duration_seconds",
			Help:    "Latency of claim requests, from arrival to answer.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		Shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dibs_shed_requests_total", Help: "Requests refused with overloaded.",
		}),
		SSEStreams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dibs_waitroom_sse_streams", Help: "Server-sent event streams of waiting-room standings open.",
		}),
		Joins: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dibs_waitroom_joins_total", Help: "Joins of waiting rooms answered with a standing.",
		}),
		PositionLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_waitroom_position_lookups_total", Help: "Waiting-room standings read for a user's request, by form (json, stream).",
		}, []string{"form"}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_http_requests_total", Help: "HTTP requests by route (the pattern matched) and status code.",
		}, []string{"route", "code"}),
		RequestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dibs_http_request_duration_seconds",
			Help:    "Time from a request's arrival to the end of its answer, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"}),
	}
	for _, form := range []string{"json", "stream"} {
		m.PositionLookups.WithLabelValues(form) // exported from the start, at 0
	}
	reg.MustRegister(m.Claims, m.ClaimSeconds, m.Shed, m.SSEStreams, m.Joins, m.PositionLookups, m.Requests, m.RequestSeconds)
	return m
}
