// Package storetest is the one test suite every
// [github.com/dibsio/dibs/store.Store] backend runs, so the SQLite and
// PostgreSQL stores are held to exactly the same contract.
//
// A backend's test file calls [Run] with a function that returns a fresh,
// empty, migrated store, and [Bench] from its benchmarks.
package storetest
