package claim

import "github.com/dibsio/dibs/keyspace"

// DefaultPrefix is the key prefix used when Config.Prefix is empty: an
// alias of keyspace.DefaultPrefix, which owns it.
const DefaultPrefix = keyspace.DefaultPrefix

// Group is the consumer group that issues a promotion's claims.
const Group = "issuers"

// Keys names the Redis keys of one promotion (or of one of its segments,
// id then being the segment's tag). Every key carries the hash tag {id}, so
// all of them live in one Cluster slot; the names are package keyspace's.
type Keys struct {
	space keyspace.Space
	id    string
}

// KeysFor returns the keys of promotion id under prefix; an empty prefix
// means DefaultPrefix.
func KeysFor(prefix, id string) Keys {
	return Keys{space: keyspace.Of(prefix, id), id: id}
}

// Meta is the hash with the promotion's stock, limit, window and flags.
func (k Keys) Meta() string { return k.space.Key(keyspace.Meta) }

// Seq is the counter of ranks handed out.
func (k Keys) Seq() string { return k.space.Key(keyspace.Seq) }

// Users maps a user id to the number of claims the user was accepted for
// (classic layout only: a compact promotion counts the user's ByUser list;
// see Layout).
func (k Keys) Users() string { return k.space.Key(keyspace.Users) }

// Status maps a rank to the claim's status: p, i:<unix ms>, f, v or r
// (revoked). Classic layout only: a compact promotion keeps StatusBytes.
func (k Keys) Status() string { return k.space.Key(keyspace.Status) }

// ByUser maps a user id to the comma-separated list of the user's ranks.
func (k Keys) ByUser() string { return k.space.Key(keyspace.ByUser) }

// Idem maps user + Idempotency-Key to the rank of the original answer.
func (k Keys) Idem() string { return k.space.Key(keyspace.Idem) }

// Reranks maps "<old rank>:<user>" to the new rank of a claim re-ranked
// because Redis had handed its rank out twice (see Gate.Rerank).
func (k Keys) Reranks() string { return k.space.Key(keyspace.Reranks) }

// Stream is the promotion's work stream of accepted claims.
func (k Keys) Stream() string { return k.space.Key(keyspace.Stream) }

// DeadLetters is the stream of dead-lettered claims.
func (k Keys) DeadLetters() string { return k.space.Key(keyspace.DeadLetters) }

// Hints is the sharded pub/sub channel on which instances tell each other
// about the promotion (new work in its stream, say). It carries the hash
// tag, so SPUBLISH and SSUBSCRIBE reach the shard that holds the keys.
func (k Keys) Hints() string { return k.space.Key(keyspace.Hints) }

// all lists the keys the claim script takes, in its KEYS order.
func (k Keys) all() []string {
	return []string{k.Meta(), k.Seq(), k.Users(), k.Status(), k.ByUser(), k.Idem(), k.Stream(), k.StatusBytes()}
}

// State lists every key of the promotion's claim state, of either layout:
// the meta hash and counters, the statuses, the idempotency records, the
// work stream and the dead-letter stream. Retiring a promotion deletes them; the database keeps what they
// held.
func (k Keys) State() []string {
	return []string{k.Meta(), k.Seq(), k.Users(), k.Status(), k.StatusBytes(), k.ByUser(), k.Idem(),
		k.Reranks(), k.Stream(), k.DeadLetters()}
}
