// Package postgres is the production [github.com/dibsio/dibs/store.Store]
// on PostgreSQL, through pgx/v5 and a pgxpool connection pool.
//
// Errors that mean the database cannot be reached right now (connection
// refused or lost, timeouts, the server shutting down) wrap
// [github.com/dibsio/dibs/store.ErrUnavailable], so callers pause and retry
// instead of giving up on the work; see [Unavailable].
//
// Times are timestamptz, sent as UTC truncated to microseconds (the
// database's precision) and returned in UTC.
package postgres
