// Package httpapi serves the dibs HTTP API described in docs/contract.md: promotions,
// claims, grants, dead letters and the operational endpoints. Every error is
// an RFC 9457 problem (application/problem+json) with a stable code member;
// clients switch on the code. Client mistakes are 4xx and change nothing;
// Redis or database outages are 503 unavailable with Retry-After; excess load
// is 503 overloaded with Retry-After, never an unbounded queue.
package httpapi
