package waitroom

// DefaultPrefix is the key prefix used when Config.Prefix is empty. It is the
// prefix of the claim keys too, so a room and its promotion share a slot.
const DefaultPrefix = "dibs:"

// registryName is the key, after the prefix, of the set of rooms the
// scheduler ticks. It is one key for all promotions, outside every hash tag.
const registryName = "waitroom:rooms"

// Keys names the Redis keys of one promotion's waiting room. They carry the
// promotion's hash tag {id}, built as the claim keys are (prefix + "{" + id +
// "}:"), so the room's keys, the claim meta and the rank counter live in one
// Cluster slot and one script can read and write them all.
type Keys struct {
	base string // prefix + "{" + id + "}:"
}

// KeysFor returns the waiting-room keys of promotion id under prefix; an
// empty prefix means DefaultPrefix.
func KeysFor(prefix, id string) Keys {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Keys{base: prefix + "{" + id + "}:"}
}

// Meta is the room's hash: its settings (rate, open_ms, ttl_ms,
// abandon_ms) and counters (admitted, cursor, skipped, spent, expired,
// pass_seq, and the marks of the measured rate).
func (k Keys) Meta() string { return k.base + "wr:meta" }

// Seq is the counter of places handed out: the place of the latest joiner.
func (k Keys) Seq() string { return k.base + "wr:seq" }

// Place maps a waiting user to the user's place.
func (k Keys) Place() string { return k.base + "wr:place" }

// ByPlace maps a place not yet reached by admission to the user who joined
// at it. Entries behind the cursor are deleted as admission passes them.
func (k Keys) ByPlace() string { return k.base + "wr:byplace" }

// Seen maps a user to the Redis time (ms) of the user's latest join or
// check-in.
func (k Keys) Seen() string { return k.base + "wr:seen" }

// Admitted maps an admitted user to "<pass id>:<expires ms>" of the user's
// latest pass.
func (k Keys) Admitted() string { return k.base + "wr:admitted" }

// Passes maps a pass id to "<state>:<expires ms>:<user>", state u (unspent),
// s (spent) or x (expired unspent, its unit given back).
func (k Keys) Passes() string { return k.base + "wr:passes" }

// Live is the sorted set of unspent passes, scored by expiry (ms): the
// passes that hold a unit of stock for their user.
func (k Keys) Live() string { return k.base + "wr:live" }

// Lease holds the id of the scheduler instance that ticks the room.
func (k Keys) Lease() string { return k.base + "wr:lease" }

// ClaimMeta is the claim gate's meta hash of the promotion (stock, voided,
// closed, ends_ms, paused), which admission reads.
func (k Keys) ClaimMeta() string { return k.base + "meta" }

// ClaimSeq is the claim gate's rank counter of the promotion.
func (k Keys) ClaimSeq() string { return k.base + "seq" }

// ClaimByUser is the claim gate's hash of each user's list of ranks, and
// ClaimUsers its hash of per-user counts (classic layout only): with the
// claim meta's mode and limit, the join script reads from them whether a
// user whose pass was spent is below the per-user limit.
func (k Keys) ClaimByUser() string { return k.base + "byuser" }

// ClaimUsers: see ClaimByUser.
func (k Keys) ClaimUsers() string { return k.base + "users" }

// room lists the keys the join, status and tick scripts take, in their
// KEYS order.
func (k Keys) room() []string {
	return []string{k.Meta(), k.Seq(), k.Place(), k.ByPlace(), k.Seen(),
		k.Admitted(), k.Passes(), k.Live(), k.ClaimMeta(), k.ClaimSeq(), k.Prequeue()}
}

// join lists the keys the join script takes: those of room, then
// ClaimByUser and ClaimUsers.
func (k Keys) join() []string { return append(k.room(), k.ClaimByUser(), k.ClaimUsers()) }

// SpendKeys lists the keys SpendScript takes, in its KEYS order: Passes,
// Live and Meta. The claim script appends them to its own keys to spend a
// pass in the step that takes the unit.
func (k Keys) SpendKeys() []string { return []string{k.Passes(), k.Live(), k.Meta()} }
