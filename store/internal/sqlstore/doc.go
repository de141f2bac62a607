// Package sqlstore holds what the SQL backends of
// [github.com/dibsio/dibs/store] share apart from their SQL: how a row's
// columns map to the store's structs and back, how dead-letter fields are
// kept, how the embedded migrations are found, ordered and applied, and how
// IssueBatch classifies each issue once the insert has run.
//
// Each backend keeps its own SQL text and its own way of encoding a time
// (PostgreSQL timestamptz, SQLite fixed-width text); the mapping here takes
// that encoding as a [Times] value, so the column order a query selects and
// the struct field each column fills are written once.
package sqlstore
