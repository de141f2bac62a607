// Package claim is the first-come-first-served gate of dibs: one Lua script
// per claim that, in a single Redis round trip, checks the promotion's window
// against Redis TIME, answers idempotent retries with their original result,
// enforces the per-user limit and the stock, hands out a dense rank in arrival
// order and appends the accepted claim to the promotion's work stream.
//
// All keys of one promotion share the hash tag {promotionID}, so every script
// touches one Redis Cluster slot and promotions spread over the shards.
//
// A [Gate] is safe for concurrent use. Outcomes other than acceptance are the
// sentinel errors [ErrSoldOut], [ErrAlreadyClaimed], [ErrNotStarted],
// [ErrEnded], [ErrNotFound], [ErrWrongMode] and [ErrRebuilding].
//
// When Redis loses writes, a promotion's counters are rebuilt from the
// database (see [Gate.BeginRebuild]): the promotion is rebuilding — every
// claim answers [ErrRebuilding] — while the database's claims are merged in,
// never lowering a counter, and claims are let in again with the rank counter
// above every rank the database holds. This wait is not an admin's pause,
// which claims answer with [ErrPaused].
//
// # Layouts
//
// A promotion's claims are kept in one of two layouts (see [Layout]), fixed
// when its meta hash is created and recorded in its mode: compact (one
// status byte per rank in [Keys.StatusBytes], the per-user count read from
// the user's list of ranks; the default) or classic (the status and users
// hashes, as earlier releases keep them). Every script reads the layout
// from the mode and runs one source for both. [Gate.Sightings] reads
// claims' statuses in either layout.
//
// # Script versions and rolling upgrades
//
// Every Lua script starts with a line naming it and its version, such as
// "-- dibs:claim v1". Redis caches scripts by the SHA1 of their source and
// the gate calls them by that hash (EVALSHA, loading the source on a miss),
// so during a rolling upgrade the scripts of two releases live side by side
// on one Redis and each instance runs its own. What the two releases share is
// the data, so:
//
//   - a script's KEYS, ARGV and reply contract (written above each script)
//     changes only under a new version number in its header, never in place;
//   - Redis keys (see [Keys]), their fields and the work-stream entry fields
//     (claim_id, user, rank, slot, at) change only in ways the previous
//     release can read: new fields may be added, existing ones keep their
//     meaning and format;
//   - claim ids keep their formats (see [ClaimID], [GrantID],
//     [CollisionID], [UndecodableID]).
package claim
