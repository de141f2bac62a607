// Package faults breaks running dibs processes on purpose and checks that no
// claim was oversold, lost or issued twice. It holds no code of its own
// outside its tests: they run real `dibs serve` processes against a
// real redis-server and PostgreSQL, put in-process Toxiproxy proxies between
// them, break things — kill -9 of dibs or of redis-server, Redis or the
// database unreachable, read-only or slow, one instance partitioned from
// Redis, Redis restored from an older snapshot, a Redis Cluster replica
// promoted while it lags, instances of the previous release replaced one by
// one by this tree's during a claim run — and after every fault check
// the invariants from the database and Redis themselves: accepted claims
// within the stock, every claim answered 202 issued or visibly
// dead-lettered, no claim issued twice, the per-user limit held, nothing
// left pending.
//
// Every random choice comes from one seed, printed at the start; repeat a
// run with -faults.seed=N (or FAULTS_SEED=N). The default (short) form
// shortens the outages so that the suite runs in a few minutes; the long form
// (-faults.long or FAULTS_LONG=1, `make faults`) runs full-length outages and
// more rounds. docs/failure-modes.md describes each fault and names its test.
package faults
