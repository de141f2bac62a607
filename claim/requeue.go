package claim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Putting back claims Redis lost that an instance had answered.
//
// A claim is answered 202 as soon as the claim script ran in Redis's memory.
// If Redis then loses a suffix of its history (a crash under appendfsync
// everysec, a restore from an older snapshot, a failover to a lagging
// replica) before any issuer read the claim, the claim exists nowhere in
// Redis — but the instance that answered it still knows it. Requeue puts
// such a claim back, under its original rank, slot and claim id, once the
// promotion was rebuilt from the database after the loss.

// Unconfirmed is a claim an instance answered and has not seen confirmed:
// what Requeue puts back if Redis lost it.
type Unconfirmed struct {
	Rank   int64
	UserID string
	Slot   int
	// AcceptedAt is when Redis accepted the claim (Result.AcceptedAt); the
	// entry put back carries it as its at field.
	AcceptedAt time.Time
	// IdemKey is the claim's Idempotency-Key, or "".
	IdemKey string
	// RebuiltAfter is when the loss was known to have happened: only a
	// rebuild that resumed later (the promotion's rebuilt_ms, Redis TIME of
	// its last resume) merged the database after it. Zero means AcceptedAt;
	// after a RequeueLost, its RequeueResult.RebuiltAfter.
	RebuiltAfter time.Time
}

// RequeueOutcome says what Requeue did for one claim.
type RequeueOutcome int

// Outcomes of Requeue.
const (
	// RequeueNotTried (the zero value): an earlier claim of the same call
	// found the promotion rebuilding, lost or missing, or failed; this one was
	// not sent.
	RequeueNotTried RequeueOutcome = iota
	// RequeuePresent: Redis holds the claim (its status, and its rank in
	// the user's list); nothing was done.
	RequeuePresent
	// Requeued: Redis had lost the claim; it is back, pending, with a
	// work-stream entry of its original fields.
	Requeued
	// RequeueCollided: Redis had lost the claim and handed its rank to
	// another claim since. The claim is back in the user's list and count
	// and has a work-stream entry of its own; the issuer's collision
	// handling gives one of the two claims a new rank.
	RequeueCollided
	// RequeueReranked: the claim was given a new rank after a collision
	// (RequeueResult.Rank); nothing was done.
	RequeueReranked
	// RequeueRebuilding: the promotion is rebuilding (or halted); nothing
	// was done: try again once it is rebuilt.
	RequeueRebuilding
	// RequeueLost: Redis lost the claim and the promotion was not rebuilt
	// since; nothing was done. Rebuild it, then call again with
	// Unconfirmed.RebuiltAfter set to RequeueResult.RebuiltAfter.
	RequeueLost
	// RequeueNotFound: Redis holds no such promotion; nothing was done.
	RequeueNotFound
)

// RequeuePaused is RequeueRebuilding under its first name.
//
// Deprecated: use RequeueRebuilding.
const RequeuePaused = RequeueRebuilding

// RequeueResult is the outcome of Requeue for one claim.
type RequeueResult struct {
	Outcome RequeueOutcome
	// Rank is the claim's new rank (RequeueReranked only).
	Rank int64
	// RebuiltAfter is when the script found the claim lost, in Redis TIME
	// (RequeueLost only): a rebuild that resumes after it merges the
	// database after the loss.
	RebuiltAfter time.Time
	// Err is set when the script could not run for this claim.
	Err error
}

// requeueScript puts back one claim that the calling instance answered and
// Redis lost, under its original rank, slot and claim id.
//
// KEYS: meta, seq, users, status, byuser, idem, stream, reranks, status
// bytes.
// ARGV: rank, user, slot, at (unix ms), claim id, Idempotency-Key ("" for
// none), rebuilt after (unix ms; see Unconfirmed.RebuiltAfter).
//
// In this order:
//   - no meta hash: {"not_found"}; rebuilding or halted (meta field
//     paused, see keyspace.FieldRebuilding): {"paused"}; nothing is done;
//   - the claim was re-ranked (reranks holds "<rank>:<user>"):
//     {"reranked", new rank};
//   - status[rank] is set and byuser[user] lists the rank: {"present"};
//   - otherwise Redis lost the claim. Unless the promotion was rebuilt
//     (rebuilt_ms) after ARGV[7], nothing is done — the database must be
//     merged before anything is put back: {"lost", after}, where after is
//     what to pass as ARGV[7] once rebuilt: the last millisecond before
//     Redis TIME now, or now itself if the last rebuild resumed within it
//     (so only a rebuild that resumes after this call counts);
//   - rebuilt since: users[user] is raised to at least the slot (classic
//     layout; a compact promotion counts the user's list), the rank
//     joins byuser[user] (once, in rank order), the Idempotency-Key is
//     recorded if absent, and an entry with the claim's original fields
//     (claim_id, user, rank, slot, at) is added to the work stream. If
//     status[rank] was absent it becomes 'p' and seq is raised to at least
//     the rank (never lowered): {"requeued"}. If it was set (another claim
//     took the rank since), it is left to that claim: {"collided"}, and the
//     issuer's collision handling re-ranks one of the two.
//
// Running it twice for one claim adds one entry, never two: the first run
// leaves the status set and the rank in the user's list, so the second
// answers present. The claim id is built by the caller (ClaimID, ids.go).
var requeueScript = newScript(`-- dibs:requeue v2` + layoutLua + `
local m = redis.call('HMGET', KEYS[1], 'stock', 'paused', 'rebuilt_ms', 'mode')
if not m[1] then return {'not_found'} end
st_mode(m[4], KEYS[4], KEYS[9])
if m[2] == '1' then return {'paused'} end
local rank, user, slot = ARGV[1], ARGV[2], tonumber(ARGV[3])
local moved = redis.call('HGET', KEYS[8], rank .. ':' .. user)
if moved then return {'reranked', tonumber(moved)} end
local s = st_get(rank)
local list = redis.call('HGET', KEYS[5], user)
local rs, listed = {}, false
if list then
  for r in string.gmatch(list, '[^,]+') do
    if r == rank then listed = true end
    rs[#rs + 1] = r
  end
end
if s and listed then return {'present'} end
if tonumber(m[3] or '0') <= tonumber(ARGV[7]) then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if tonumber(m[3] or '0') < now then now = now - 1 end
  return {'lost', now}
end
if not st_compact and tonumber(redis.call('HGET', KEYS[3], user) or '0') < slot then
  redis.call('HSET', KEYS[3], user, slot)
end
if not listed then
  rs[#rs + 1] = rank
  table.sort(rs, function(a, b) return tonumber(a) < tonumber(b) end)
  redis.call('HSET', KEYS[5], user, table.concat(rs, ','))
end
if not s then
  st_set(rank, 'p')
  if tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(rank) then
    redis.call('SET', KEYS[2], rank)
  end
end
if ARGV[6] ~= '' then
  redis.call('HSETNX', KEYS[6], user .. '\n' .. ARGV[6], rank .. ':' .. slot)
end
redis.call('XADD', KEYS[7], '*', 'claim_id', ARGV[5], 'user', user,
  'rank', rank, 'slot', slot, 'at', ARGV[4])
if s then return {'collided'} end
return {'requeued'}
`)

// Requeue puts back the claims of promotion id that the caller answered and
// Redis lost (see requeueScript for what it checks and does), one script
// call per claim. It returns one result per claim, in order; running it
// again for the same claims changes nothing. It stops at the first claim
// answered rebuilding, lost or not found, or that fails: the claims after it
// would be answered alike, and keep a zero Outcome (not tried).
//
// The calls are sent one after the other rather than pipelined: a pipelined
// script run loads the script on every node first, and right after a
// failover a node that died may still be listed.
func (g *Gate) Requeue(ctx context.Context, id string, cs []Unconfirmed) []RequeueResult {
	out := make([]RequeueResult, len(cs))
	k := g.Keys(id)
	keys := []string{k.Meta(), k.Seq(), k.Users(), k.Status(), k.ByUser(), k.Idem(), k.Stream(), k.Reranks(), k.StatusBytes()}
	for i, c := range cs {
		after := c.RebuiltAfter
		if after.IsZero() {
			after = c.AcceptedAt
		}
		res := requeueScript.Exec(ctx, g.client, keys, []string{
			strconv.FormatInt(c.Rank, 10), c.UserID, strconv.Itoa(c.Slot),
			strconv.FormatInt(c.AcceptedAt.UnixMilli(), 10), ClaimID(id, c.Rank), c.IdemKey,
			strconv.FormatInt(after.UnixMilli(), 10),
		})
		r, err := requeueResult(res)
		if err != nil {
			r = RequeueResult{Err: fmt.Errorf("requeue %s rank %d: %w", id, c.Rank, err)}
		}
		out[i] = r
		if r.Err != nil || r.Outcome == RequeueRebuilding || r.Outcome == RequeueLost || r.Outcome == RequeueNotFound {
			break
		}
	}
	return out
}

func requeueResult(res rueidis.RedisResult) (RequeueResult, error) {
	vals, err := res.ToArray()
	if err != nil {
		return RequeueResult{}, err
	}
	if len(vals) == 0 {
		return RequeueResult{}, errors.New("empty script reply")
	}
	status, err := vals[0].ToString()
	if err != nil {
		return RequeueResult{}, err
	}
	num := func() (int64, error) {
		if len(vals) < 2 {
			return 0, errors.New("short script reply")
		}
		return vals[1].AsInt64()
	}
	switch status {
	case "present":
		return RequeueResult{Outcome: RequeuePresent}, nil
	case "requeued":
		return RequeueResult{Outcome: Requeued}, nil
	case "collided":
		return RequeueResult{Outcome: RequeueCollided}, nil
	case "paused":
		return RequeueResult{Outcome: RequeueRebuilding}, nil
	case "not_found":
		return RequeueResult{Outcome: RequeueNotFound}, nil
	case "reranked":
		n, err := num()
		return RequeueResult{Outcome: RequeueReranked, Rank: n}, err
	case "lost":
		n, err := num()
		return RequeueResult{Outcome: RequeueLost, RebuiltAfter: time.UnixMilli(n).UTC()}, err
	}
	return RequeueResult{}, fmt.Errorf("unexpected outcome %q", status)
}
