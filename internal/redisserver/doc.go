// Package redisserver starts and stops a private redis-server child process.
//
// dibs uses it for its embedded default (`dibs serve` without --redis runs its
// own Redis next to it) and the test helpers use it to run real Redis servers,
// single nodes and the members of a test Redis Cluster.
//
// The child listens on 127.0.0.1 only, never writes RDB snapshots, and keeps
// an append-only file in its data directory unless AppendFsync is "off".
//
// # Orphans
//
// A child must never outlive its parent: a leftover redis-server would keep
// the port and, worse, the append-only file of a data directory that a
// restarted dibs wants to use. The child is started with the Linux parent
// death signal set to SIGKILL. That signal fires when the OS thread that
// forked the child exits, not when the process does, so the child is forked
// from a goroutine locked to its OS thread that stays there, waiting for the
// child, until the child exits.
//
// The child runs in a process group of its own, so a Ctrl-C in a terminal
// reaches only the parent: `dibs serve` drains its consumers on SIGINT and
// still needs Redis to acknowledge their last entries; it stops the child
// afterwards. Should the parent die instead, the death signal ends the child.
//
// # Locking
//
// With Options.Lock the server takes an exclusive flock on Dir/dibs.lock and
// hands the locked descriptor down to the child too, so the lock is held as
// long as either the parent or the redis-server is alive. A second Start on
// the same directory, from this process or another, fails with ErrLocked:
// two redis-servers never write one append-only file.
package redisserver
