package claim

import "github.com/dibsio/dibs/keyspace"

// claimScriptSource is the Lua source of claimScript (see there for its KEYS,
// ARGV and reply). It is a constant of its own so that tools outside the gate,
// such as the redis-benchmark run of scripts/bench-claim.sh, can load the very
// script the gate runs instead of a copy that could drift.
const claimScriptSource = "-- dibs:claim v5\n" + leanHead + leanTake + leanAccept

// claimRoomScriptSource is the Lua source of claimRoomScript: the claim
// script with the waiting room's pass check (keyspace.RoomPassLua, the
// waitroom package's PassLua) between the window checks and the per-user
// limit, and the spend of the pass in the step that takes the unit.
const claimRoomScriptSource = "-- dibs:claim_room v4" + keyspace.RoomPassLua + leanHead + claimPassCheck +
	leanTake + claimPassSpend + leanAccept

// The parts of the claim scripts, written for Redis's CPU: each command a
// script runs costs about as much as the Lua around all of them (see
// docs/benchmarks.md, "A leaner claim script"), so they run as few as the
// outcome needs and no helper functions. leanHead reads the meta hash,
// checks the mode and the fence, answers a retry whose Idempotency-Key
// matched and checks the window (it defines m, compact, seq, user, idem and
// now); leanTake checks the per-user limit and the stock and takes the unit
// (it defines stock, voided, rank and slot); leanAccept answers the accepted
// claim. A promotion an admin paused (meta field held = 1, see
// keyspace.FieldPaused) answers held after the window checks, so a retry
// whose Idempotency-Key matched still gets its answer. An outcome other
// than a claim is answered as a bare string (its name), which costs Redis
// less than a table.
//
// The layout is read from the mode (see Layout) by comparing it whole: only
// first_come (classic) and first_come:2 (compact) are claimed.
//
// leanHead is cut where it reads Redis (leanMeta, leanSeq, leanTime) and
// where it checks what it read (leanMode, leanFence, leanWindow), so that
// the batch claim script (batch.go) reads the meta hash, the rank counter
// and the time once per call and runs the checks, leanTake and leanAccept
// for each of its claims, text for text the ones a claim runs alone.
const (
	leanHead = leanMeta + leanMode + leanSeq + leanFence + leanTime + leanWindow
	leanMeta = `local m = redis.call('HMGET', KEYS[1], 'stock', 'limit', 'starts_ms', 'ends_ms', 'closed', 'voided', 'mode', 'paused', 'held')
`
	leanMode = `if not m[1] then return 'not_found' end
local compact = m[7] == 'first_come:2'
if not compact and m[7] ~= 'first_come' then return 'wrong_mode' end
if m[8] == '1' then return 'rebuilding' end
`
	leanSeq = `local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
`
	leanFence = `if seq < tonumber(ARGV[4] or '0') then
  redis.call('HSET', KEYS[1], 'paused', 1)
  return 'lost'
end
local user, idem = ARGV[1], ARGV[2]
if idem ~= '' then
  local r = redis.call('HGET', KEYS[6], user .. '\n' .. idem)
  if r then
    local rank, slot = string.match(r, '^(%d+):(%d+)$')
    local s
    if compact then s = redis.call('GETRANGE', KEYS[8], rank, rank) else s = redis.call('HGET', KEYS[4], rank) end
    if s == 'v' then return 'voided' end
    return {'ok', tonumber(rank), 1, tonumber(slot), -1}
  end
end
if m[5] == '1' then return 'ended' end
`
	leanTime = `local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
`
	leanWindow = `if now < tonumber(m[3]) then return 'not_started' end
if now >= tonumber(m[4]) then return 'ended' end
if m[9] == '1' then return 'held' end
`
	// leanTake: in a compact promotion with a per-user limit of 1, one
	// HSETNX of the user's list both checks the limit and records the
	// rank (the rank is seq + 1: the script runs alone); the stock is
	// checked before it, and a sold-out answer first looks whether the
	// user holds a claim, so already_claimed still comes before sold_out.
	leanTake = `local stock, limit, voided = tonumber(m[1]), tonumber(m[2]), tonumber(m[6] or '0')
local rank, slot = seq + 1, 1
if compact and limit == 1 then
  if seq - voided >= stock then
    if redis.call('HEXISTS', KEYS[5], user) == 1 then return 'already_claimed' end
    return 'sold_out'
  end
  if redis.call('HSETNX', KEYS[5], user, rank) == 0 then return 'already_claimed' end
  redis.call('SETRANGE', KEYS[8], rank, 'p')
else
  local list = redis.call('HGET', KEYS[5], user)
  local count = 0
  if not compact then
    count = tonumber(redis.call('HGET', KEYS[3], user) or '0')
  elseif list then
    local _, n = string.gsub(list, ',', '')
    count = n + 1
  end
  if count >= limit then return 'already_claimed' end
  if seq - voided >= stock then return 'sold_out' end
  slot = count + 1
  if list then list = list .. ',' .. rank else list = rank end
  redis.call('HSET', KEYS[5], user, list)
  if compact then
    redis.call('SETRANGE', KEYS[8], rank, 'p')
  else
    redis.call('HSET', KEYS[3], user, slot)
    redis.call('HSET', KEYS[4], rank, 'p')
  end
end
redis.call('INCR', KEYS[2])
if idem ~= '' then redis.call('HSET', KEYS[6], user .. '\n' .. idem, rank .. ':' .. slot) end
redis.call('XADD', KEYS[7], '*', 'claim_id', ARGV[3] .. '#' .. rank, 'user', user,
  'rank', rank, 'slot', slot, 'at', now)
`
	leanAccept = `return {'ok', rank, 0, slot, stock - (rank - voided), now}
`
)

// The parts of the segment claim script (segments.go), which is the claim
// script of the previous release (claim v4, testdata/claim_v4.lua) with
// its own mode check and rank: claimHeadMeta reads the meta hash and the
// layout (it defines m and mode), claimHeadRest checks the fence, answers a
// retry whose Idempotency-Key matched and checks the window (it defines
// seq, user, idem and now); claimTakeCheck checks the per-user limit and
// the stock (it defines list, count, stock and voided), and claimTakeWrite
// takes the unit for rank (it defines slot).
const (
	claimHeadMeta = `local m = redis.call('HMGET', KEYS[1], 'stock', 'limit', 'starts_ms', 'ends_ms', 'closed', 'voided', 'mode', 'paused', 'held')
if not m[1] then return {'not_found'} end
local mode = st_mode(m[7], KEYS[4], KEYS[8])
`
	claimHeadRest = `if m[8] == '1' then return {'rebuilding'} end
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
if seq < tonumber(ARGV[4] or '0') then
  redis.call('HSET', KEYS[1], 'paused', 1)
  return {'lost', seq}
end
local user = ARGV[1]
local idem = ARGV[2]
if idem ~= '' then
  local r = redis.call('HGET', KEYS[6], user .. '\n' .. idem)
  if r then
    local rank, slot = string.match(r, '^(%d+):(%d+)$')
    if st_get(rank) == 'v' then return {'voided', tonumber(rank)} end
    return {'ok', tonumber(rank), 1, tonumber(slot), -1}
  end
end
if m[5] == '1' then return {'ended'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(m[3]) then return {'not_started'} end
if now >= tonumber(m[4]) then return {'ended'} end
if m[9] == '1' then return {'held'} end
`
	claimTakeCheck = `local list = redis.call('HGET', KEYS[5], user)
local count = held(KEYS[3], user, list)
if count >= tonumber(m[2]) then return {'already_claimed'} end
local stock = tonumber(m[1])
local voided = tonumber(m[6] or '0')
if seq - voided >= stock then return {'sold_out'} end
`
	claimTakeWrite = `local slot = count + 1
if not st_compact then redis.call('HSET', KEYS[3], user, slot) end
st_set(rank, 'p')
if list then list = list .. ',' .. rank else list = tostring(rank) end
redis.call('HSET', KEYS[5], user, list)
if idem ~= '' then redis.call('HSET', KEYS[6], user .. '\n' .. idem, rank .. ':' .. slot) end
redis.call('XADD', KEYS[7], '*', 'claim_id', ARGV[3] .. '#' .. rank, 'user', user,
  'rank', rank, 'slot', slot, 'at', now)
`
)

// The waiting room's parts of claimRoomScript. KEYS[9..11] are the room's
// passes, live and meta keys, ARGV[5] the pass id ("" for none). A promotion
// whose room meta does not exist has no waiting room: the pass is ignored.
const (
	claimPassCheck = `local room = redis.call('EXISTS', KEYS[11]) == 1
if room then
  if (ARGV[5] or '') == '' then return {'not_admitted', 'none'} end
  local refused = wr_pass_check(KEYS[9], ARGV[5], user, now)
  if refused then return {'not_admitted', refused} end
end
`
	claimPassSpend = `if room then wr_pass_spend(KEYS[9], KEYS[10], KEYS[11], ARGV[5]) end
`
)

// ClaimScriptSource returns the Lua source of the first-come claim script,
// exactly as Gate.Claim runs it.
//
// KEYS, in this order: the promotion's Meta, Seq, Users, Status, ByUser,
// Idem, Stream and StatusBytes keys (see Keys); the meta hash's mode tells
// which of Users, Status and StatusBytes the promotion's layout uses. ARGV: the user id, the Idempotency-Key ("" for
// none), the promotion id and, optionally, the fence: the highest rank the
// caller knows to be taken (0 or absent for none). The reply is {"ok", rank,
// 0, slot, remaining, at} for a newly accepted claim (at: Redis TIME in unix
// ms, the entry's at field), {"ok", rank, 1, slot, -1} for an Idempotency-Key
// retry answered with its original claim, or the outcome's name as a bare
// string: not_found, wrong_mode, lost (the rank counter is below the fence;
// the script then marks the promotion rebuilding), rebuilding, voided (the retried
// claim was voided), ended, not_started, held (paused by an admin: ErrPaused),
// already_claimed or sold_out. (The previous release's script, claim v4,
// answered these as one-element arrays, and lost as {"lost", seq}.)
//
// It exists for benchmarks and diagnostics that drive Redis directly, for
// example to measure how fast a Redis server can run the script at all.
func ClaimScriptSource() string { return claimScriptSource }

// ClaimScriptKeys returns the keys of promotion id under prefix in the order
// the claim script takes them (see ClaimScriptSource). An empty prefix means
// DefaultPrefix.
func ClaimScriptKeys(prefix, id string) []string { return KeysFor(prefix, id).all() }
