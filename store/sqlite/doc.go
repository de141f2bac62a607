// Package sqlite is the embedded default
// [github.com/dibsio/dibs/store.Store]: one SQLite database file, pure Go
// (modernc.org/sqlite, no cgo).
//
// SQLite allows one writer at a time, so the store keeps exactly one write
// connection and every write in the process goes through it, each
// transaction starting with BEGIN IMMEDIATE; reads use a separate pool and,
// in WAL mode, never wait for the writer. Another process writing the same
// file is waited for up to Config.BusyTimeout.
//
// IssueBatch calls are handed to one writer goroutine that runs the calls
// which queued up while it was busy in a single transaction (group commit),
// so many concurrent issuers cost one commit instead of one each. The
// writer keeps its multi-row inserts prepared, one per row count of a small
// fixed set, so an insert is not compiled anew for every batch.
//
// Durability: the database runs in WAL mode with synchronous=NORMAL by
// default, which survives a crash of the process but may lose the last
// commits on a power loss. Set Config.Synchronous to SynchronousFull (or add
// ?synchronous=full to the URL) to sync every commit.
//
// Times are stored as fixed-width UTC text with microsecond precision.
package sqlite
