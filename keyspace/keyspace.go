// Package keyspace owns the Redis keyspace of a promotion: the key prefix
// and its default, the hash tag, the names of the keys of a promotion (and
// of each of its segments), the names of the meta hash's fields that the
// scripts of more than one package read, and the Lua shared between the
// claim and waiting-room scripts.
//
// Every key of a promotion is <prefix>{<tag>}:<name>, tag being the
// promotion's id (or, for segment k > 0 of a segmented promotion, the
// segment's tag, see claim.SegmentsOf). The braces make the tag Redis
// Cluster's hash tag, so every key of one promotion (or segment) lives in
// one slot and one script may read and write them all; a script touches
// no key outside its promotion's (or segment's) tag.
//
// The claim and waitroom packages build their keys (claim.Keys,
// waitroom.Keys) from it. The package imports nothing of dibs, so both
// may use it and an embedder may pick a prefix without pulling in either.
package keyspace

// DefaultPrefix is the key prefix used when a configuration leaves it
// empty (claim.DefaultPrefix and waitroom.DefaultPrefix are this).
const DefaultPrefix = "dibs:"

// Space is the keys of one hash tag under one prefix: those of a promotion
// or of one of its segments. Its zero value is not usable; make it with Of.
type Space struct {
	base string // prefix + "{" + tag + "}:"
}

// Of returns the keyspace of tag (a promotion id or a segment's tag) under
// prefix; an empty prefix means DefaultPrefix.
func Of(prefix, tag string) Space {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Space{base: prefix + HashTag(tag) + ":"}
}

// HashTag is tag as a Redis Cluster hash tag: "{" + tag + "}".
func HashTag(tag string) string { return "{" + tag + "}" }

// Base is the part every key of the space starts with: prefix, hash tag and
// a colon.
func (s Space) Base() string { return s.base }

// Key is the key of the space named name (one of the names below, or a
// name the caller owns).
func (s Space) Key(name string) string { return s.base + name }

// The names of a promotion's claim keys (and of each segment's), after the
// space's Base. See claim.Keys for what each holds.
const (
	Meta        = "meta"       // the claim meta hash: stock, limit, window, mode and flags
	Seq         = "seq"        // the counter of ranks handed out
	Users       = "users"      // per-user claim counts (classic layout)
	Status      = "status"     // rank → status (classic layout)
	StatusBytes = "st"         // one status byte per rank (compact layout)
	ByUser      = "byuser"     // user → comma-separated ranks
	Idem        = "idem"       // user + Idempotency-Key → rank and slot
	Reranks     = "reranks"    // "<old rank>:<user>" → new rank
	Stream      = "claims"     // the work stream of accepted claims
	DeadLetters = "claims:dlq" // the stream of dead-lettered claims
	Hints       = "hint"       // the sharded pub/sub channel of hints
	Transfers   = "xfer"       // stock taken from this segment, not yet given
	Received    = "xin"        // the ids of the transfers this segment was given
	// Alive is the start of the name of an instance's marker key that the
	// promotion manager's probe writes: Alive + instance.
	Alive = "alive:"
)

// The names of a promotion's waiting-room keys, after the space's Base.
// See waitroom.Keys for what each holds.
const (
	RoomMeta     = "wr:meta"     // the room's settings and counters
	RoomSeq      = "wr:seq"      // the counter of places handed out
	RoomPlace    = "wr:place"    // user → place (classic layout)
	RoomByPlace  = "wr:byplace"  // place → user (classic layout)
	RoomSeen     = "wr:seen"     // user → latest check-in (classic layout)
	RoomUser     = "wr:u"        // user → "<place>:<seen>" (compact layout)
	RoomLine     = "wr:line"     // the list of users in order of place (compact layout)
	RoomAdmitted = "wr:admitted" // admitted user → latest pass
	RoomPasses   = "wr:passes"   // pass id → state, expiry and user
	RoomLive     = "wr:live"     // unspent passes by expiry
	RoomLease    = "wr:lease"    // the id of the scheduler instance ticking the room
	RoomPrequeue = "wr:pre"      // the users collected by the opening moment
	RoomShuffled = "wr:shuffled" // the prequeue in the shuffle's order
	RoomEvents   = "wr:ev"       // the sharded pub/sub channel of the room's hints
	// RoomSpentChallenge is the start of the name of a spent
	// proof-of-work challenge's mark: RoomSpentChallenge + hex id.
	RoomSpentChallenge = "wr:pow:"
)

// The fields of the claim meta hash (key Meta) that the scripts of more
// than one package read: the claim package writes them, the waiting room's
// scripts read them. Lua spells them as these strings; a test checks every
// script that uses one spells it so.
const (
	FieldStock    = "stock"     // units for sale
	FieldVoided   = "voided"    // claims voided, their units back in stock
	FieldClosed   = "closed"    // 1 once the promotion was closed early
	FieldStartsMs = "starts_ms" // the window's start, unix ms
	FieldEndsMs   = "ends_ms"   // the window's end, unix ms
	FieldLimit    = "limit"     // claims per user
	FieldMode     = "mode"      // first_come, first_come:2, grant, segment…
	// FieldRebuilding is 1 while claims wait for a rebuild of the
	// promotion's counters (a rebuild, a lost rank counter or an operator's
	// halt holds them). Go calls this hold "rebuilding"; the stored field
	// keeps its first name, "paused", which the scripts and the Redis data
	// of every version share (renaming it would take new script versions).
	FieldRebuilding = "paused"
	// FieldPaused is 1 while an admin paused the promotion's claims (PATCH
	// … {"paused": true}). Go calls this "paused"; the stored field keeps
	// its first name, "held", for the same reason as FieldRebuilding's.
	FieldPaused = "held"
)

// FieldRoomSpent is the field of the room meta hash (key RoomMeta) that
// counts spent passes: RoomPassLua's wr_pass_spend, run by the claim
// package's script, increments it and the waiting room reads it.
const FieldRoomSpent = "spent"
