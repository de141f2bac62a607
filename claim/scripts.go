package claim

import "github.com/redis/rueidis"

// claimScript admits one first-come claim.
//
// KEYS: meta, seq, users, status, byuser, idem, stream.
// ARGV: user id, Idempotency-Key ("" for none), promotion id.
//
// Returns {"ok", rank, replayed(0|1), slot, remaining} on acceptance, or
// {outcome} with outcome one of not_found, wrong_mode, rebuilding, ended,
// not_started, already_claimed, sold_out. A promotion paused while its
// counters are rebuilt (meta field paused = 1) answers rebuilding to every
// claim, retries included, since its counters cannot be trusted yet. A
// retry carrying an Idempotency-Key that was already accepted returns the
// original rank with replayed = 1 before any other check, so it is answered
// the same even after the stock ran out.
// The window is checked against Redis TIME, never the caller's clock.
var claimScript = rueidis.NewLuaScript(claimScriptSource)

// grantScript enqueues grants for a batch of users.
//
// KEYS: meta, seq, users, status, byuser, stream.
// ARGV: promotion id, then the user ids.
//
// Returns {"ok", enqueued, duplicates} or {outcome} with outcome one of
// not_found, wrong_mode, rebuilding, ended. A user already granted is a
// duplicate; a paused promotion (see claimScript) enqueues nothing.
var grantScript = rueidis.NewLuaScript(`
local m = redis.call('HMGET', KEYS[1], 'ends_ms', 'closed', 'mode', 'paused')
if not m[3] then return {'not_found'} end
if m[3] ~= 'grant' then return {'wrong_mode'} end
if m[4] == '1' then return {'rebuilding'} end
if m[2] == '1' then return {'ended'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now >= tonumber(m[1]) then return {'ended'} end
local enq, dup = 0, 0
for i = 2, #ARGV do
  local user = ARGV[i]
  if redis.call('HSETNX', KEYS[3], user, 1) == 0 then
    dup = dup + 1
  else
    local rank = redis.call('INCR', KEYS[2])
    redis.call('HSET', KEYS[4], rank, 'p')
    redis.call('HSET', KEYS[5], user, tostring(rank))
    redis.call('XADD', KEYS[6], '*', 'claim_id', ARGV[1] .. '@' .. user, 'user', user,
      'rank', rank, 'slot', 1, 'at', now)
    enq = enq + 1
  end
end
return {'ok', enq, dup}
`)

// openScript makes a promotion's Redis state exist: the meta hash (written
// only if absent, so a live promotion's counters are never reset), the rank
// counter raised to at least the given floor, and the stream with its
// consumer group created at id 0 so claims accepted before any consumer runs
// are never skipped.
//
// KEYS: meta, seq, stream.
// ARGV: stock, limit, starts_ms, ends_ms, closed, mode, seq floor, group,
// and optionally "1" to create the meta hash paused (see Gate.OpenPaused).
//
// Returns 1 if the meta hash was created, 0 if it existed (then only the
// closed flag and the end are refreshed).
var openScript = rueidis.NewLuaScript(`
local created = 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'limit', ARGV[2], 'starts_ms', ARGV[3],
    'ends_ms', ARGV[4], 'closed', ARGV[5], 'mode', ARGV[6], 'voided', 0)
  if ARGV[9] == '1' then redis.call('HSET', KEYS[1], 'paused', 1) end
  created = 1
else
  redis.call('HSET', KEYS[1], 'ends_ms', ARGV[4])
  if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'closed', 1) end
end
local floor = tonumber(ARGV[7])
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
if seq < floor then redis.call('SET', KEYS[2], floor) end
local ok = redis.pcall('XGROUP', 'CREATE', KEYS[3], ARGV[8], '0', 'MKSTREAM')
if type(ok) == 'table' and ok.err and not string.find(ok.err, 'BUSYGROUP') then
  return redis.error_reply(ok.err)
end
return created
`)

// closeScript ends a promotion now. KEYS: meta. Returns 0 if unknown.
var closeScript = rueidis.NewLuaScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'closed', 1)
return 1
`)

// ackScript acknowledges issued claims and marks them issued, in one step,
// so a claim's status and its place in the consumer group never disagree.
//
// KEYS: status, stream.
// ARGV: group, then pairs of (entry id, rank).
//
// A voided claim keeps its status. Returns the number of entries acked. One
// XACK and one HSET serve the whole batch; callers send at most ackChunk
// entries per call, well inside Lua's stack for unpack.
var ackScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids, ranks = {}, {}
for i = 2, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
  if ARGV[i + 1] ~= '' then ranks[#ranks + 1] = ARGV[i + 1] end
end
local acked = redis.call('XACK', KEYS[2], ARGV[1], unpack(ids))
if #ranks > 0 then
  local cur = redis.call('HMGET', KEYS[1], unpack(ranks))
  local set = {}
  for j = 1, #ranks do
    if cur[j] ~= 'v' then
      set[#set + 1] = ranks[j]
      set[#set + 1] = 'i:' .. now
    end
  end
  if #set > 0 then redis.call('HSET', KEYS[1], unpack(set)) end
end
return acked
`)

// failScript marks dead-lettered claims failed. KEYS: status. ARGV: ranks.
// Issued and voided claims keep their status.
var failScript = rueidis.NewLuaScript(`
for i = 1, #ARGV do
  local s = redis.call('HGET', KEYS[1], ARGV[i])
  if s == 'p' then redis.call('HSET', KEYS[1], ARGV[i], 'f') end
end
return #ARGV
`)

// replayScript puts a dead-lettered claim back into the pipeline under its
// own claim id. KEYS: status, stream. ARGV: rank, then field/value pairs.
// Only a failed claim is re-enqueued (and marked pending), so applying one
// replay twice adds one entry, never two. Returns 1 if it enqueued.
var replayScript = rueidis.NewLuaScript(`
local s = redis.call('HGET', KEYS[1], ARGV[1])
if s ~= 'f' then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], 'p')
local args = {'XADD', KEYS[2], '*'}
for i = 2, #ARGV do args[#args + 1] = ARGV[i] end
redis.call(unpack(args))
return 1
`)

// voidScript gives up on dead-lettered claims and returns their units to
// stock. KEYS: meta, status. ARGV: ranks. Returns the number voided.
var voidScript = rueidis.NewLuaScript(`
local n = 0
for i = 1, #ARGV do
  local s = redis.call('HGET', KEYS[2], ARGV[i])
  if s == 'f' or s == 'p' then
    redis.call('HSET', KEYS[2], ARGV[i], 'v')
    n = n + 1
  end
end
if n > 0 then redis.call('HINCRBY', KEYS[1], 'voided', n) end
return n
`)

// userScript reads one user's claims. KEYS: byuser, status. ARGV: user id.
// Returns a flat list of rank, status pairs.
var userScript = rueidis.NewLuaScriptReadOnly(`
local list = redis.call('HGET', KEYS[1], ARGV[1])
if not list then return {} end
local out = {}
for rank in string.gmatch(list, '[^,]+') do
  out[#out + 1] = rank
  out[#out + 1] = redis.call('HGET', KEYS[2], rank) or 'p'
end
return out
`)
