// Package bench is the load generator behind `dibs bench` and `dibs demo`:
// it fires claims at a running server and checks, from what the clients saw,
// that none was oversold, lost or issued twice.
//
// It works purely over the public HTTP API: [Run] creates a first-come
// promotion with the admin token, fires claims for a set of users (in waves
// that start together behind a barrier, or as a steady stream from a fixed
// number of workers), records every claim's latency in an HDR histogram and
// its outcome by problem `code`, then polls the promotion until every
// accepted claim is confirmed in the database. The [Report] it returns holds
// throughput, latency percentiles, outcomes and a list of invariant [Check]s:
// no oversell, ranks exactly 1..accepted, the per-user limit, the server's
// counts agreeing with what clients saw, and every accepted claim issued.
//
// The checks are computed from what the clients observed, not from what the
// server says about itself, so a report that passes is evidence that the
// invariants held from the outside.
package bench
