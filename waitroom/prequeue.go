package waitroom

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/keyspace"
)

// MinSeedLen is the shortest seed a prequeue accepts.
const MinSeedLen = 16

// StatusPrequeue: collected by the room's opening moment, before the
// shuffle; no place yet. Standing.ShuffleAt says when the places are dealt.
const StatusPrequeue Status = "prequeue"

// Outcomes of the opening moment.
var (
	// ErrNotStarted means the room takes no joins yet: its opening moment
	// (Settings.PrequeueFrom) has not come. It is the claim gate's
	// claim.ErrNotStarted, so callers that map the gate's outcomes answer it
	// as not started.
	ErrNotStarted = claim.ErrNotStarted
	// ErrNoPrequeue means the room has no opening moment.
	ErrNoPrequeue = errors.New("waitroom: the room has no prequeue")
	// ErrNotShuffled means the prequeue has not been shuffled yet: the
	// first tick at or after the opening does it.
	ErrNotShuffled = errors.New("waitroom: the prequeue is not shuffled yet")
)

// Prequeue is the set of users collected by the opening moment: the join
// list the shuffle orders. It is kept after the shuffle.
func (k Keys) Prequeue() string { return k.space.Key(keyspace.RoomPrequeue) }

// Shuffled is the list of the prequeue's users in the order the shuffle
// gave them places: its first element has the first place.
func (k Keys) Shuffled() string { return k.space.Key(keyspace.RoomShuffled) }

// SeedSHA256 returns the hex SHA-256 of seed: the commitment a promotion
// shows before its start.
func SeedSHA256(seed []byte) string {
	h := sha256.Sum256(seed)
	return hex.EncodeToString(h[:])
}

// PrequeueOrder returns users in the order the shuffle gives them places:
// ascending by SHA-256(seed || user id), the digests compared as bytes (as
// their hex strings sort), ties (never seen in practice) by user id. It is
// the whole rule: anyone holding the revealed seed and the join list can
// recompute the order. users is not modified.
func PrequeueOrder(seed []byte, users []string) []string {
	type keyed struct {
		digest [sha256.Size]byte
		user   string
	}
	ks := make([]keyed, len(users))
	buf := make([]byte, 0, len(seed)+64)
	for i, u := range users {
		buf = append(append(buf[:0], seed...), u...)
		ks[i] = keyed{digest: sha256.Sum256(buf), user: u}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := bytes.Compare(a.digest[:], b.digest[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.user, b.user)
	})
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.user
	}
	return out
}

// assignScript gives a sealed prequeue's users their places, one chunk of
// the shuffled order at a time.
//
// KEYS: Meta, Place, ByPlace, Shuffled, Prequeue, User. ARGV: offset (the
// places of the order assigned before this chunk), then the chunk's users
// in order.
//
// It writes nothing and returns -1 unless pq is sealed; it writes nothing
// and returns pq_next if offset is not pq_next (another caller assigned
// that chunk: resume from the answer). Otherwise every user must be a
// member of Prequeue and the chunk must not run past pq_n (an error reply,
// nothing written); user i of the chunk gets place pq_base + offset + i
// (Place and ByPlace in a LayoutClassic room; in a LayoutCompact one the
// user's entry in User, keeping the time of the user's latest check-in)
// and is appended to Shuffled. pq_next advances; at pq_n the prequeue is
// done. Returns the new pq_next.
//
// Version 2 serves both layouts (see Layout); the first, unnamed
// (testdata/assign_v1.lua), wrote Place and ByPlace alone.
var assignScript = rueidis.NewLuaScript("-- dibs:wr_assign v2" + entryLua + `
local m = redis.call('HMGET', KEYS[1], 'pq', 'pq_next', 'pq_n', 'pq_base', 'layout')
if m[1] ~= 'sealed' then return -1 end
local nxt, n, base = tonumber(m[2]), tonumber(m[3]), tonumber(m[4])
if nxt ~= tonumber(ARGV[1]) then return nxt end
if nxt + #ARGV - 1 > n then return redis.error_reply('ERR chunk runs past the prequeue') end
for i = 2, #ARGV do
  if redis.call('SISMEMBER', KEYS[5], ARGV[i]) == 0 then
    return redis.error_reply('ERR not in the prequeue: ' .. ARGV[i])
  end
end
for i = 2, #ARGV do
  nxt = nxt + 1
  local place = base + nxt
  if m[5] == '2' then
    local _, seen = unentry(redis.call('HGET', KEYS[6], ARGV[i]))
    redis.call('HSET', KEYS[6], ARGV[i], entry(place, seen or 0))
  else
    redis.call('HSET', KEYS[2], ARGV[i], place)
    redis.call('HSET', KEYS[3], place, ARGV[i])
  end
  redis.call('RPUSH', KEYS[4], ARGV[i])
end
if nxt >= n then
  redis.call('HSET', KEYS[1], 'pq_next', nxt, 'pq', 'done')
else
  redis.call('HSET', KEYS[1], 'pq_next', nxt)
end
return nxt
`)

// shuffle deals the places of promotion id's sealed prequeue: it reads the
// set (frozen since the seal) and the seed, orders the users with
// PrequeueOrder and assigns the places in chunks of TickBatch. Any number
// of callers may shuffle at once: they compute the same order, and each
// chunk is assigned once (assignScript's offset guard).
func (r *Rooms) shuffle(ctx context.Context, id string) error {
	k := r.Keys(id)
	res := r.client.DoMulti(ctx,
		r.client.B().Hmget().Key(k.Meta()).Field("pq", "pq_n", "pq_next", "pq_seed").Build(),
		r.client.B().Smembers().Key(k.Prequeue()).Build())
	meta, err := res[0].ToArray()
	if err != nil {
		return fmt.Errorf("shuffle prequeue of %s: %w", id, err)
	}
	users, err := res[1].AsStrSlice()
	if err != nil {
		return fmt.Errorf("shuffle prequeue of %s: %w", id, err)
	}
	if len(meta) < 4 {
		return fmt.Errorf("shuffle prequeue of %s: short meta reply", id)
	}
	if pq, _ := meta[0].ToString(); pq != "sealed" {
		return nil // done by another caller
	}
	n, err1 := meta[1].AsInt64()
	next, err2 := meta[2].AsInt64()
	seedHex, err3 := meta[3].ToString()
	seed, err4 := hex.DecodeString(seedHex)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fmt.Errorf("shuffle prequeue of %s: meta: %w", id, err)
	}
	if int64(len(users)) != n {
		return fmt.Errorf("shuffle prequeue of %s: %d users in the set, %d sealed", id, len(users), n)
	}
	order := PrequeueOrder(seed, users)
	keys := []string{k.Meta(), k.Place(), k.ByPlace(), k.Shuffled(), k.Prequeue(), k.User()}
	for next >= 0 && next < n {
		end := min(next+int64(r.cfg.TickBatch), n)
		args := make([]string, 0, end-next+1)
		args = append(args, strconv.FormatInt(next, 10))
		args = append(args, order[next:end]...)
		if next, err = assignScript.Exec(ctx, r.client, keys, args).AsInt64(); err != nil {
			return fmt.Errorf("shuffle prequeue of %s: %w", id, err)
		}
	}
	return nil
}

// PrequeueList is a page of a shuffled prequeue, for auditing it.
type PrequeueList struct {
	// Users are the prequeue's users in the order the shuffle gave them
	// places, from the page's offset.
	Users []string
	// Total is the users the prequeue collected.
	Total int64
}

// Prequeue lists up to limit users of promotion id's shuffled prequeue from
// offset (0 = the first place), in the order they were given places: with
// the revealed seed, PrequeueOrder of the whole list gives this order back.
// It answers ErrNotFound without a room, ErrNoPrequeue for a room without
// one, and ErrNotShuffled before the shuffle.
func (r *Rooms) Prequeue(ctx context.Context, id string, offset, limit int64) (PrequeueList, error) {
	k := r.Keys(id)
	if offset < 0 || limit < 0 {
		return PrequeueList{}, fmt.Errorf("prequeue of %s: negative offset or limit", id)
	}
	res := r.client.DoMulti(ctx,
		r.client.B().Hmget().Key(k.Meta()).Field("open_ms", "pq").Build(),
		r.client.B().Llen().Key(k.Shuffled()).Build())
	meta, err := res[0].ToArray()
	if err != nil || len(meta) < 2 {
		return PrequeueList{}, fmt.Errorf("prequeue of %s: %w", id, errors.Join(err, errors.New("short reply")))
	}
	switch pq, _ := meta[1].ToString(); {
	case meta[0].IsNil():
		return PrequeueList{}, ErrNotFound
	case meta[1].IsNil():
		return PrequeueList{}, ErrNoPrequeue
	case pq != "done":
		return PrequeueList{}, ErrNotShuffled
	}
	total, err := res[1].AsInt64()
	if err != nil {
		return PrequeueList{}, fmt.Errorf("prequeue of %s: %w", id, err)
	}
	list := PrequeueList{Total: total, Users: []string{}}
	if limit == 0 || offset >= total {
		return list, nil
	}
	if list.Users, err = r.client.Do(ctx, r.client.B().Lrange().Key(k.Shuffled()).
		Start(offset).Stop(offset+limit-1).Build()).AsStrSlice(); err != nil {
		return PrequeueList{}, fmt.Errorf("prequeue of %s: %w", id, err)
	}
	return list, nil
}
