// Package edge is the HTTP middleware that lets the join and claim
// endpoints face browsers directly: the client address behind trusted
// proxies, per-user and per-IP rate limits shared through Redis, signed
// user tokens (JWTs) and CORS.
//
// Build one Edge from the `edge:` section of the configuration with New,
// then wrap each join and claim handler:
//
//	e, err := edge.New(cfg, redisClient)
//	…
//	h = e.Wrap(edge.KindClaim, func(r *http.Request) string { return r.PathValue("id") }, h)
//
// Wrap applies, outermost first, CORS, ClientIP, UserToken and RateLimit;
// each is also available alone. Inside the handler, CheckUser gives the
// user the request acts for (the token's, when user tokens are on) and
// LimitUser applies the per-user limit to a user known only from the body.
//
// Every part is off in the zero Config. docs/edge.md describes the
// settings, the trust model and what happens when Redis is unreachable.
package edge
