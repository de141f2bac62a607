package edge

import "github.com/prometheus/client_golang/prometheus"

// Scopes of dibs_edge_rate_limited_total: which limit refused a request.
const (
	// ScopeUser is a per-user limit.
	ScopeUser = "user"
	// ScopeIP is a per-IP (per client address or IPv6 network) limit.
	ScopeIP = "ip"
)

// Reasons of dibs_edge_user_token_refused_total: why a user token was
// refused. The set is closed, so the series stay few.
const (
	// ReasonMissing: no bearer token.
	ReasonMissing = "missing"
	// ReasonMalformed: not a JWT, or too long.
	ReasonMalformed = "malformed"
	// ReasonSignature: a bad signature, or another algorithm than the
	// configured one.
	ReasonSignature = "signature"
	// ReasonUnknownKey: the token's kid names none of the configured keys.
	ReasonUnknownKey = "unknown_key"
	// ReasonExpired: exp has passed.
	ReasonExpired = "expired"
	// ReasonNotYetValid: nbf or iat lies ahead.
	ReasonNotYetValid = "not_yet_valid"
	// ReasonMissingExp: the token has no exp.
	ReasonMissingExp = "missing_exp"
	// ReasonIssuer: iss is not the configured issuer.
	ReasonIssuer = "issuer"
	// ReasonAudience: aud lacks the configured audience.
	ReasonAudience = "audience"
	// ReasonSubject: sub is not a valid user id.
	ReasonSubject = "subject"
	// ReasonInvalid: any other failure.
	ReasonInvalid = "invalid"
)

// Metrics count what the edge refuses. Give them to Config.Metrics; a nil
// *Metrics counts nothing.
type Metrics struct {
	rateLimited   *prometheus.CounterVec
	tokenRefused  *prometheus.CounterVec
	corsPreflight prometheus.Counter
}

// NewMetrics creates the edge's series and registers them with reg:
// dibs_edge_rate_limited_total{scope}, dibs_edge_user_token_refused_total{reason}
// and dibs_edge_cors_preflight_refused_total. Every label value is created
// at zero, so a rate over them is defined before the first refusal.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_edge_rate_limited_total",
			Help: "Join and claim requests refused 429 by the edge's rate limits, by the limit that refused them (user or ip).",
		}, []string{"scope"}),
		tokenRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dibs_edge_user_token_refused_total",
			Help: "Join and claim requests refused 401 because their user token was missing or invalid, by reason.",
		}, []string{"reason"}),
		corsPreflight: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dibs_edge_cors_preflight_refused_total",
			Help: "CORS preflights answered without CORS headers: an origin or method not allowed.",
		}),
	}
	for _, s := range []string{ScopeUser, ScopeIP} {
		m.rateLimited.WithLabelValues(s)
	}
	for _, r := range []string{ReasonMissing, ReasonMalformed, ReasonSignature, ReasonUnknownKey, ReasonExpired,
		ReasonNotYetValid, ReasonMissingExp, ReasonIssuer, ReasonAudience, ReasonSubject, ReasonInvalid} {
		m.tokenRefused.WithLabelValues(r)
	}
	reg.MustRegister(m.rateLimited, m.tokenRefused, m.corsPreflight)
	return m
}

func (m *Metrics) rateLimitedInc(scope string) {
	if m != nil {
		m.rateLimited.WithLabelValues(scope).Inc()
	}
}

func (m *Metrics) tokenRefusedInc(reason string) {
	if m != nil {
		m.tokenRefused.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) corsPreflightInc() {
	if m != nil {
		m.corsPreflight.Inc()
	}
}
