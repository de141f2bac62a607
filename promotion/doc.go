// Package promotion runs promotions — limited stocks of coupons, vouchers or
// points that users claim first come, first served, within a time window —
// from the claim to the row in the database. It validates and creates
// promotions, keeps their Redis gate state in step with the database, starts
// and stops the confirmation pool of each promotion on the stream runtime,
// and issues accepted claims into the database exactly once, each with what
// its promotion's kind gives it ([Config.Issuers], package issue).
//
// A [Manager] is the one entry point the HTTP API (or an embedding program)
// needs. On Start it finds the promotions that are not drained from the
// database — never by scanning Redis — and resumes confirmation of each one,
// including entries a killed process left pending. An instance that starts
// a promotion's pool for claims it took tells the other instances with a
// hint over sharded pub/sub, and they start or wake theirs at once. A
// re-check every second is the guarantee behind the hints: it starts the
// pool of any promotion that has work (claims accepted on another instance
// whose hint was lost, say), detects lost Redis writes, and marks ended
// promotions drained once every accepted claim is issued or dead-lettered.
// An idle promotion — nothing to confirm, no pool running here — is
// re-checked in full every ten minutes instead ([Config.IdleRecheckInterval]);
// one loss probe per Redis master watches them all for lost writes, so an
// idle instance sends Redis almost nothing.
//
// # Who owns what
//
// The Manager's loop is the one goroutine that owns the set of undrained
// promotions: it re-checks them, opens a promotion Redis does not know
// (reading its definition and the database's highest rank), drains ended
// ones and starts rebuilds; it publishes the set as an immutable snapshot
// that claims read without a lock. A claim ([Manager.Claim]) is one script
// call plus a non-blocking wake of its pool, handed to the Manager's waker
// goroutine. A claim on a promotion Redis does not know asks the loop to open
// it and waits at most [Config.OpenWait]; it never queries the database
// itself. Rebuilds run in goroutines of their own, one per promotion; the
// issuers run in the stream pools' goroutines.
//
// # Errors
//
// Every sentinel a Manager method returns is one of this package's:
// [ErrNotFound], [ErrAlreadyExists], [ErrWrongMode] and [ErrNotReady] are
// its own (the claim and store packages' "not found", "already exists" and
// "wrong mode" are translated into them), and the claim outcomes
// [ErrNotStarted], [ErrEnded], [ErrAlreadyClaimed], [ErrSoldOut],
// [ErrVoided], [ErrRebuilding] and [ErrRebuildBusy] are the claim package's
// sentinels under the same names — the same values, so errors.Is matches
// either. A [*ValidationError] names the field of a definition that is
// wrong. Any other error means Redis or the database did not answer as
// expected.
package promotion
