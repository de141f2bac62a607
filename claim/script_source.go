package claim

import "github.com/dibsio/dibs/internal/roompass"

// claimScriptSource is the Lua source of claimScript (see there for its KEYS,
// ARGV and reply). It is a constant of its own so that tools outside the gate,
// such as the redis-benchmark run of scripts/bench-claim.sh, can load the very
// script the gate runs instead of a copy that could drift.
const claimScriptSource = "-- dibs:claim v4" + layoutLua + claimHead + claimTake + claimAccept

// claimRoomScriptSource is the Lua source of claimRoomScript: the claim
// script with the waiting room's pass check (roompass.Lua, the waitroom
// package's PassLua) between the window checks and the per-user limit, and
// the spend of the pass in the step that takes the unit.
const claimRoomScriptSource = "-- dibs:claim_room v3" + layoutLua + roompass.Lua + claimHead + claimPassCheck +
	claimTake + claimPassSpend + claimAccept

// The parts of the claim scripts. claimHead reads the meta hash, checks the
// fence, answers a retry whose Idempotency-Key matched and checks the window
// (it defines m, seq, user, idem and now); claimTake checks the per-user
// limit and the stock and takes the unit (it defines stock, voided, rank and
// slot); claimAccept answers the accepted claim. claimHead and claimTake
// are made of smaller parts that the segment claim script (segments.go)
// shares, with its own mode check and rank in between. A promotion an admin
// paused (meta field held = 1, see Gate.Patch) answers held after the window
// checks, so a retry whose Idempotency-Key matched still gets its answer.
const (
	claimHead     = claimHeadMeta + claimHeadMode + claimHeadRest
	claimHeadMeta = `local m = redis.call('HMGET', KEYS[1], 'stock', 'limit', 'starts_ms', 'ends_ms', 'closed', 'voided', 'mode', 'paused', 'held')
if not m[1] then return {'not_found'} end
local mode = st_mode(m[7], KEYS[4], KEYS[8])
`
	claimHeadMode = `if mode ~= 'first_come' then return {'wrong_mode'} end
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
	claimTake      = claimTakeCheck + claimTakeRank + claimTakeWrite
	claimTakeCheck = `local list = redis.call('HGET', KEYS[5], user)
local count = held(KEYS[3], user, list)
if count >= tonumber(m[2]) then return {'already_claimed'} end
local stock = tonumber(m[1])
local voided = tonumber(m[6] or '0')
if seq - voided >= stock then return {'sold_out'} end
`
	claimTakeRank = `local rank = redis.call('INCR', KEYS[2])
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
	claimAccept = `return {'ok', rank, 0, slot, stock - (rank - voided), now}
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
// retry answered with its original claim, {"lost", seq} when
// the rank counter is below the fence (the script then pauses the
// promotion), or a one-element array naming the outcome: not_found,
// wrong_mode, rebuilding, ended, not_started, held (paused by an admin),
// already_claimed or sold_out.
//
// It exists for benchmarks and diagnostics that drive Redis directly, for
// example to measure how fast a Redis server can run the script at all.
func ClaimScriptSource() string { return claimScriptSource }

// ClaimScriptKeys returns the keys of promotion id under prefix in the order
// the claim script takes them (see ClaimScriptSource). An empty prefix means
// DefaultPrefix.
func ClaimScriptKeys(prefix, id string) []string { return KeysFor(prefix, id).all() }
