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
// database (see [Gate.Pause]): the promotion is paused — every claim answers
// [ErrRebuilding] — while the database's claims are merged in, never
// lowering a counter, and resumed with the rank counter above every rank the
// database holds.
package claim
