package waitroom

import (
	"strconv"

	"github.com/dibsio/dibs/keyspace"
)

// DefaultPrefix is the key prefix used when Config.Prefix is empty: an
// alias of keyspace.DefaultPrefix, which owns it. It is the prefix of the
// claim keys too, so a room and its promotion share a slot.
const DefaultPrefix = keyspace.DefaultPrefix

// registryName is the key, after the prefix, of the set of rooms the
// scheduler ticks. It is one key for all promotions, outside every hash tag.
const registryName = "waitroom:rooms"

// Layout is how a room keeps its line in Redis. It is fixed when the room
// is created, in the meta's layout field: absent for LayoutClassic, 2 for
// LayoutCompact. Every script of this release serves both; Config.Layout
// says which one Rooms.Open creates.
type Layout int

const (
	// LayoutCompact keeps each user in line as one entry of User (place
	// and latest check-in packed) and the line as a list, Line: about 90
	// bytes of Redis memory per waiting user with ids of about 10
	// characters, against about 210 for LayoutClassic (docs/benchmarks.md).
	// Its meta keeps the rate in rate2, not rate, and Place, ByPlace and
	// Seen hold marker strings: the previous release's scripts, which know
	// only LayoutClassic, read rate first and answer not_found without it
	// (its instances answer joins and statuses 503 with Retry-After and
	// give a tick's lease up), and any that gets past that fails on a
	// marker before it writes. The default.
	LayoutCompact Layout = 2
	// LayoutClassic keeps each user in line in three hashes, Place,
	// ByPlace and Seen: the previous release's layout, which both
	// releases' scripts serve.
	LayoutClassic Layout = 1
)

// String names the layout: "compact" or "classic".
func (l Layout) String() string {
	switch l {
	case LayoutCompact:
		return "compact"
	case LayoutClassic:
		return "classic"
	}
	return "layout(" + strconv.Itoa(int(l)) + ")"
}

// Keys names the Redis keys of one promotion's waiting room. They carry the
// promotion's hash tag {id} and live in its keyspace (package keyspace), as
// the claim keys do, so the room's keys, the claim meta and the rank
// counter live in one Cluster slot and one script can read and write them
// all.
type Keys struct {
	space keyspace.Space
}

// KeysFor returns the waiting-room keys of promotion id under prefix; an
// empty prefix means DefaultPrefix.
func KeysFor(prefix, id string) Keys {
	return Keys{space: keyspace.Of(prefix, id)}
}

// Meta is the room's hash: its settings (rate, open_ms, ttl_ms,
// abandon_ms) and counters (admitted, cursor, skipped, spent, expired,
// pass_seq, and the marks of the measured rate).
func (k Keys) Meta() string { return k.space.Key(keyspace.RoomMeta) }

// Seq is the counter of places handed out: the place of the latest joiner.
func (k Keys) Seq() string { return k.space.Key(keyspace.RoomSeq) }

// Place maps a waiting user to the user's place (LayoutClassic). In a
// LayoutCompact room it is a string, a marker that makes the previous
// release's scripts fail before they write (see LayoutCompact).
func (k Keys) Place() string { return k.space.Key(keyspace.RoomPlace) }

// ByPlace maps a place not yet reached by admission to the user who joined
// at it (LayoutClassic). Entries behind the cursor are deleted as
// admission passes them. A marker string in a LayoutCompact room.
func (k Keys) ByPlace() string { return k.space.Key(keyspace.RoomByPlace) }

// Seen maps a user to the Redis time (ms) of the user's latest join or
// check-in (LayoutClassic). A marker string in a LayoutCompact room.
func (k Keys) Seen() string { return k.space.Key(keyspace.RoomSeen) }

// User maps a user to "<place>:<seen>" (LayoutCompact): the user's place
// (0 for a prequeue member not yet placed) and the Redis time (ms) of the
// user's latest join or check-in, both in base 36. A waiting user's entry
// is deleted when admission lets the user in; an abandoned user's stays,
// its place behind the cursor, so the status still answers abandoned.
func (k Keys) User() string { return k.space.Key(keyspace.RoomUser) }

// Line is the list of users in order of place (LayoutCompact): its head is
// the user at the first place after the cursor, or, while admission is in
// a shuffled prequeue's places, after them (those are read from
// Shuffled). Admission trims what it passed; a user who took a later place
// since leaves an entry that admission skips.
func (k Keys) Line() string { return k.space.Key(keyspace.RoomLine) }

// Admitted maps an admitted user to "<pass id>:<expires ms>" of the user's
// latest pass.
func (k Keys) Admitted() string { return k.space.Key(keyspace.RoomAdmitted) }

// Passes maps a pass id to "<state>:<expires ms>:<user>", state u (unspent),
// s (spent) or x (expired unspent, its unit given back).
func (k Keys) Passes() string { return k.space.Key(keyspace.RoomPasses) }

// Live is the sorted set of unspent passes, scored by expiry (ms): the
// passes that hold a unit of stock for their user.
func (k Keys) Live() string { return k.space.Key(keyspace.RoomLive) }

// Lease holds the id of the scheduler instance that ticks the room.
func (k Keys) Lease() string { return k.space.Key(keyspace.RoomLease) }

// ClaimMeta is the claim gate's meta hash of the promotion (stock, voided,
// closed, ends_ms, held, paused), which admission reads.
func (k Keys) ClaimMeta() string { return k.space.Key(keyspace.Meta) }

// ClaimSeq is the claim gate's rank counter of the promotion.
func (k Keys) ClaimSeq() string { return k.space.Key(keyspace.Seq) }

// ClaimByUser is the claim gate's hash of each user's list of ranks, and
// ClaimUsers its hash of per-user counts (classic layout only): with the
// claim meta's mode and limit, the join script reads from them whether a
// user whose pass was spent is below the per-user limit.
func (k Keys) ClaimByUser() string { return k.space.Key(keyspace.ByUser) }

// ClaimUsers: see ClaimByUser.
func (k Keys) ClaimUsers() string { return k.space.Key(keyspace.Users) }

// room lists the keys the join, status, tick and snapshot scripts take, in
// their KEYS order: those of the previous release, then User, Line and
// Shuffled.
func (k Keys) room() []string {
	return []string{k.Meta(), k.Seq(), k.Place(), k.ByPlace(), k.Seen(),
		k.Admitted(), k.Passes(), k.Live(), k.ClaimMeta(), k.ClaimSeq(), k.Prequeue(),
		k.User(), k.Line(), k.Shuffled()}
}

// join lists the keys the join script takes: those of room, then
// ClaimByUser and ClaimUsers.
func (k Keys) join() []string { return append(k.room(), k.ClaimByUser(), k.ClaimUsers()) }

// All lists every key of the room but the spent proof-of-work marks (which
// expire by themselves), in both layouts: what retiring the promotion
// deletes.
func (k Keys) All() []string {
	return []string{k.Meta(), k.Seq(), k.Place(), k.ByPlace(), k.Seen(), k.User(), k.Line(),
		k.Admitted(), k.Passes(), k.Live(), k.Lease(), k.Prequeue(), k.Shuffled(), k.Events()}
}

// SpendKeys lists the keys SpendScript takes, in its KEYS order: Passes,
// Live and Meta. The claim script appends them to its own keys to spend a
// pass in the step that takes the unit.
func (k Keys) SpendKeys() []string { return []string{k.Passes(), k.Live(), k.Meta()} }
