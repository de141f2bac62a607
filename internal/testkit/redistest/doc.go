// Package redistest runs real Redis servers for tests: one binary-wide
// single node, one binary-wide three-master Redis Cluster, and dedicated
// servers for tests that crash or restart Redis.
//
// The shared servers start lazily on first use and are stopped by Main after
// the tests ran, so a test binary that uses them declares
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// Main is testmain.Main with the leak exceptions of the Redis client, so it
// also stops the servers of other helpers, such as pgtest's.
//
// Tests share the servers; each keeps to its own key prefix (Prefix), so they
// run in parallel. A suite that must hold on both topologies ranges over
// Topologies.
//
// Set DIBS_REDIS_LOG=1 to see the servers' logs on standard error.
package redistest
