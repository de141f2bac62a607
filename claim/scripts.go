package claim

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/rueidis"
)

// Every script's source starts with a line that names it and its version,
// "-- dibs:<name> v<n>" (see the package documentation): scripts are loaded
// by the hash of their source, so two releases' scripts coexist on one Redis
// while a new release rolls out, and a script's KEYS, ARGV and reply change
// only under a new version. Every script is made by newScript or
// newReadOnlyScript, which keep its source for the test of that header.

// scriptSources holds the source of every script of the package.
var scriptSources []string

// scriptSHAs maps every script made by newScript to the SHA1 of its source
// (written while the package initialises, read-only afterwards).
var scriptSHAs = map[*rueidis.Lua]string{}

// newScript returns the script of src (EVALSHA, with EVAL on a miss).
func newScript(src string) *rueidis.Lua {
	scriptSources = append(scriptSources, src)
	l := rueidis.NewLuaScript(src)
	sum := sha1.Sum([]byte(src))
	scriptSHAs[l] = hex.EncodeToString(sum[:])
	return l
}

// execPipelined runs script s (made by newScript) once per exec, in one
// round trip of EVALSHAs; a call the server answers NOSCRIPT (it did not
// run) runs again with s.Exec, which loads the script. Every key of one
// exec must be in one Cluster slot; the execs may be in different ones.
func execPipelined(ctx context.Context, c rueidis.Client, s *rueidis.Lua, execs []rueidis.LuaExec) []rueidis.RedisResult {
	if len(execs) == 1 {
		return []rueidis.RedisResult{s.Exec(ctx, c, execs[0].Keys, execs[0].Args)}
	}
	sha := scriptSHAs[s]
	cmds := make(rueidis.Commands, len(execs))
	for i, e := range execs {
		cmds[i] = c.B().Evalsha().Sha1(sha).Numkeys(int64(len(e.Keys))).Key(e.Keys...).Arg(e.Args...).Build()
	}
	res := c.DoMulti(ctx, cmds...)
	for i, r := range res {
		if err, ok := rueidis.IsRedisErr(r.Error()); ok && err.IsNoScript() {
			res[i] = s.Exec(ctx, c, execs[i].Keys, execs[i].Args)
		}
	}
	return res
}

// newReadOnlyScript is newScript for a script that writes nothing
// (EVALSHA_RO, so it may run on a replica).
func newReadOnlyScript(src string) *rueidis.Lua {
	scriptSources = append(scriptSources, src)
	return rueidis.NewLuaScriptReadOnly(src)
}

// claimScript admits one first-come claim.
//
// KEYS: meta, seq, users, status, byuser, idem, stream, status bytes (the
// meta hash's mode picks the layout, see Layout).
// ARGV: user id, Idempotency-Key ("" for none), promotion id, fence.
//
// The fence is the highest rank the calling instance knows to be taken (from
// its own answers, its issuance and the database's highest rank). A rank
// counter below it means Redis lost writes: the script marks the promotion
// rebuilding (every instance then answers rebuilding until it is rebuilt) and returns
// "lost" before anything else, so no rank the caller knows of is handed out
// twice.
//
// Returns {"ok", rank, 0, slot, remaining, at} on acceptance (at: Redis
// TIME in unix ms, as the entry's at field holds it), {"ok", rank, 1, slot,
// -1} for a retry answered with its original claim, or the outcome's name
// as a bare string: one of not_found, wrong_mode, lost, rebuilding, voided,
// ended, not_started, held, already_claimed, sold_out. held (ErrPaused): an
// admin paused the promotion (meta field held = 1, see keyspace.FieldPaused
// and Gate.BeginPatch), checked after the window. A promotion whose counters
// are being rebuilt (meta field paused = 1, see keyspace.FieldRebuilding)
// answers rebuilding to every claim, retries included, since its counters
// cannot be trusted yet. A
// retry carrying an Idempotency-Key that was already accepted returns the
// original rank with replayed = 1 before any other check, so it is answered
// the same even after the stock ran out.
// The window is checked against Redis TIME, never the caller's clock. The
// entry's claim_id is <promotion>#<rank>, as ClaimID builds it (ids.go).
var claimScript = newScript(claimScriptSource)

// claimRoomScript admits one first-come claim in a promotion that may have
// a waiting room, spending the user's pass in the step that takes the unit.
//
// KEYS: meta, seq, users, status, byuser, idem, stream, status bytes (as
// claimScript), then the room's passes, live and meta keys (waitroom Keys.SpendKeys).
// ARGV: user id, Idempotency-Key ("" for none), promotion id, fence (as
// claimScript), pass id of the entry token verified by the caller ("" for
// none).
//
// It runs claimScript's checks in claimScript's order, with the pass check
// between the window and the per-user limit: a retry whose Idempotency-Key
// matched gets its original answer before the pass is looked at; then, if
// the room meta exists, a missing pass answers {"not_admitted", "none"}
// and a pass that is unknown, another user's, spent or expired (Redis TIME)
// answers {"not_admitted", reason} with reason one of unknown, not_yours,
// spent, expired, writing nothing. already_claimed and sold_out leave the
// pass unspent; an accepted claim spends it (wr_pass_spend). Without the
// room meta the pass is ignored and the script is claimScript. The other
// replies are claimScript's.
var claimRoomScript = newScript(claimRoomScriptSource)

// grantScript enqueues grants for a batch of users.
//
// KEYS: meta, seq, users, status, byuser, stream, status bytes.
// ARGV: promotion id, fence (see claimScript), then the user ids.
//
// Returns {"ok", enqueued, duplicates}, {"lost", seq} (see claimScript) or
// {outcome} with outcome one of not_found, wrong_mode, rebuilding, ended. A
// user already granted (in the users hash, or for the compact layout in
// byuser) is a duplicate; a rebuilding promotion (see claimScript)
// enqueues nothing. Each entry's claim_id is <promotion>@<user>, as GrantID
// builds it (ids.go).
var grantScript = newScript(`-- dibs:grant v2` + layoutLua + `
local m = redis.call('HMGET', KEYS[1], 'ends_ms', 'closed', 'mode', 'paused')
if not m[3] then return {'not_found'} end
if st_mode(m[3], KEYS[4], KEYS[7]) ~= 'grant' then return {'wrong_mode'} end
if m[4] == '1' then return {'rebuilding'} end
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
if seq < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'paused', 1)
  return {'lost', seq}
end
if m[2] == '1' then return {'ended'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now >= tonumber(m[1]) then return {'ended'} end
local enq, dup = 0, 0
for i = 3, #ARGV do
  local user = ARGV[i]
  local new
  if st_compact then
    new = redis.call('HEXISTS', KEYS[5], user) == 0
  else
    new = redis.call('HSETNX', KEYS[3], user, 1) == 1
  end
  if not new then
    dup = dup + 1
  else
    local rank = redis.call('INCR', KEYS[2])
    st_set(rank, 'p')
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
// KEYS: meta, seq, stream, status, status bytes.
// ARGV: stock, limit, starts_ms, ends_ms, closed, mode, seq floor, group,
// "1" to create the meta hash rebuilding (field paused, see Gate.OpenRebuilding)
// else "0", "1" if an admin paused the promotion (field held, see
// Gate.BeginPatch) else "0", and
// the layout's mode suffix ("" classic, ":2" compact, see Layout).
//
// A meta hash created anew records the mode with the layout's suffix,
// unless statuses of one layout outlived the meta hash (Redis lost it
// alone): then the promotion keeps that layout, so a rebuild merges the
// database into the records it has.
//
// Returns 1 if the meta hash was created, 0 if it existed (then only the
// closed flag and the end are refreshed). A promotion closed by an admin
// (closed = 1) is also marked closed_admin, which no later end moves undo
// (see patchScript).
var openScript = newScript(`-- dibs:open v3
local created = 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  local suffix = ARGV[11] or ''
  if redis.call('EXISTS', KEYS[5]) == 1 then
    suffix = ':2'
  elseif redis.call('EXISTS', KEYS[4]) == 1 then
    suffix = ''
  end
  redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'limit', ARGV[2], 'starts_ms', ARGV[3],
    'ends_ms', ARGV[4], 'closed', ARGV[5], 'mode', ARGV[6] .. suffix, 'voided', 0)
  if ARGV[9] == '1' then redis.call('HSET', KEYS[1], 'paused', 1) end
  if ARGV[10] == '1' then redis.call('HSET', KEYS[1], 'held', 1) end
  created = 1
else
  redis.call('HSET', KEYS[1], 'ends_ms', ARGV[4])
  if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'closed', 1) end
end
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'closed_admin', 1) end
local floor = tonumber(ARGV[7])
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
if seq < floor then redis.call('SET', KEYS[2], floor) end
local ok = redis.pcall('XGROUP', 'CREATE', KEYS[3], ARGV[8], '0', 'MKSTREAM')
if type(ok) == 'table' and ok.err and not string.find(ok.err, 'BUSYGROUP') then
  return redis.error_reply(ok.err)
end
return created
`)

// closeScript ends a promotion now, for an admin: closed = 1, and
// closed_admin = 1 so that moving its end later never reopens it (see
// patchScript). KEYS: meta. Returns 0 if unknown.
var closeScript = newScript(`-- dibs:close v2
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'closed', 1, 'closed_admin', 1)
return 1
`)

// ackScript acknowledges issued claims and marks them issued, in one step,
// so a claim's status and its place in the consumer group never disagree.
//
// KEYS: status, stream, meta, status bytes.
// ARGV: group, then pairs of (entry id, rank).
//
// A voided or revoked claim keeps its status. The meta hash's confirmed field is raised
// to the highest rank acked: the database held each of these claims before
// the ack (callers ack only what it committed), so a database whose highest
// rank is below confirmed lost rows it had (see Gate.Confirmed). Returns the
// number of entries acked. One XACK serves the whole batch, and one HMGET
// and one HSET (classic layout) or one GETRANGE and one SETRANGE over the
// batch's ranks (compact layout: ranks of one batch are close together; a
// batch spread wider than ackSpan is written rank by rank) mark them;
// callers send at most ackChunk entries per call (Gate.Ack cuts bigger
// batches), so one call holds Redis for a bounded time.
var ackScript = newScript(`-- dibs:ack v3` + layoutLua + `
local m = redis.call('HMGET', KEYS[3], 'stock', 'confirmed', 'mode')
st_mode(m[3], KEYS[1], KEYS[4])
local ids, ranks, top = {}, {}, 0
for i = 2, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
  if ARGV[i + 1] ~= '' then
    ranks[#ranks + 1] = ARGV[i + 1]
    local r = tonumber(ARGV[i + 1])
    if r and r > top then top = r end
  end
end
local acked = redis.call('XACK', KEYS[2], ARGV[1], unpack(ids))
if #ranks > 0 and st_compact then
  local rs = {}
  for j = 1, #ranks do
    local r = tonumber(ranks[j])
    if r and r >= 1 then rs[#rs + 1] = math.floor(r) end
  end
  table.sort(rs)
  if #rs > 0 and rs[#rs] - rs[1] < ` + ackSpan + ` then
    local lo, hi = rs[1], rs[#rs]
    local cur = redis.call('GETRANGE', KEYS[4], lo, hi)
    if #cur < hi - lo + 1 then cur = cur .. string.rep('\0', hi - lo + 1 - #cur) end
    local out, at = {}, lo
    for j = 1, #rs do
      local r = rs[j]
      if r >= at then
        out[#out + 1] = string.sub(cur, at - lo + 1, r - lo)
        local c = string.sub(cur, r - lo + 1, r - lo + 1)
        if c == 'v' or c == 'r' then out[#out + 1] = c else out[#out + 1] = 'i' end
        at = r + 1
      end
    end
    redis.call('SETRANGE', KEYS[4], lo, table.concat(out))
  else
    for j = 1, #rs do
      local c = st_get(rs[j])
      if c ~= 'v' and c ~= 'r' then st_set(rs[j], 'i') end
    end
  end
elseif #ranks > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local cur = redis.call('HMGET', KEYS[1], unpack(ranks))
  local set = {}
  for j = 1, #ranks do
    if cur[j] ~= 'v' and cur[j] ~= 'r' then
      set[#set + 1] = ranks[j]
      set[#set + 1] = 'i:' .. now
    end
  end
  if #set > 0 then redis.call('HSET', KEYS[1], unpack(set)) end
end
if top > 0 and m[1] and top > tonumber(m[2] or '0') then
  redis.call('HSET', KEYS[3], 'confirmed', top)
end
return acked
`)

// ackSpan bounds the span of ranks (highest less lowest) one compact
// ackScript call reads and writes as one range: 4 kB of status bytes.
const ackSpan = "4096"

// haltScript halts a promotion for an operator: it marks it rebuilding
// (claims and grants answer rebuilding) and records why in the meta field halted, which
// keeps every automatic rebuild away (pauseScript answers halted) until an
// operator's rebuild takes it over.
//
// KEYS: meta. ARGV: reason.
//
// Returns 1 if it halted the promotion, 0 if it was halted already, -1 if
// the meta hash is gone.
var haltScript = newScript(`-- dibs:halt v1
if redis.call('HEXISTS', KEYS[1], 'stock') == 0 then return -1 end
if redis.call('HEXISTS', KEYS[1], 'halted') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'paused', 1, 'halted', ARGV[1])
return 1
`)

// failScript marks dead-lettered claims failed. KEYS: status, meta, status
// bytes. ARGV: ranks. Issued and voided claims keep their status.
var failScript = newScript(`-- dibs:fail v2` + layoutLua + `
st_mode(redis.call('HGET', KEYS[2], 'mode'), KEYS[1], KEYS[3])
for i = 1, #ARGV do
  if st_get(ARGV[i]) == 'p' then st_set(ARGV[i], 'f') end
end
return #ARGV
`)

// replayScript puts a dead-lettered claim back into the pipeline under its
// own claim id. KEYS: status, stream, meta, status bytes. ARGV: rank, then
// field/value pairs.
// Only a failed claim is re-enqueued (and marked pending), so applying one
// replay twice adds one entry, never two. Returns 1 if it enqueued, 0 if the
// claim had moved on already (pending again, issued or voided), and -1 if
// Redis holds no status for the rank at all (it lost the claim, and a
// rebuild has not restored it yet): then nothing happened.
var replayScript = newScript(`-- dibs:replay v2` + layoutLua + `
st_mode(redis.call('HGET', KEYS[3], 'mode'), KEYS[1], KEYS[4])
local s = st_get(ARGV[1])
if not s then return -1 end
if s ~= 'f' then return 0 end
st_set(ARGV[1], 'p')
local args = {'XADD', KEYS[2], '*'}
for i = 2, #ARGV do args[#args + 1] = ARGV[i] end
redis.call(unpack(args))
return 1
`)

// voidScript gives up on dead-lettered claims and returns their units to
// stock. KEYS: meta, status, status bytes. ARGV: ranks. Returns {voided,
// ranks...}: the
// number voided, then the ranks Redis holds no status for (it lost them,
// and a rebuild has not restored them yet), for which nothing happened.
var voidScript = newScript(`-- dibs:void v2` + layoutLua + `
st_mode(redis.call('HGET', KEYS[1], 'mode'), KEYS[2], KEYS[3])
local n = 0
local unknown = {}
for i = 1, #ARGV do
  local s = st_get(ARGV[i])
  if s == 'f' or s == 'p' then
    st_set(ARGV[i], 'v')
    n = n + 1
  elseif not s then
    unknown[#unknown + 1] = ARGV[i]
  end
end
if n > 0 then redis.call('HINCRBY', KEYS[1], 'voided', n) end
return {n, unpack(unknown)}
`)

// endScript decides whether a promotion has ended, against Redis TIME, and
// reads its rank counter in the same step. An ended promotion is marked
// closed, so no claim is accepted after the answer whatever its end is
// changed to.
//
// KEYS: meta, seq. Returns {ended (0|1), seq}, or {-1} if the meta hash is
// missing.
var endScript = newScript(`-- dibs:end v1
local m = redis.call('HMGET', KEYS[1], 'ends_ms', 'closed')
if not m[1] then return {-1} end
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
if m[2] == '1' then return {1, seq} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(m[1]) then return {0, seq} end
redis.call('HSET', KEYS[1], 'closed', 1)
return {1, seq}
`)

// userScript reads one user's claims. KEYS: byuser, status, meta, status
// bytes. ARGV: user id. Returns a flat list of rank, status pairs (an
// issued claim's status is i:<unix ms> in the classic layout, i in the
// compact one).
var userScript = newReadOnlyScript(`-- dibs:user v2` + layoutLua + `
st_mode(redis.call('HGET', KEYS[3], 'mode'), KEYS[2], KEYS[4])
local list = redis.call('HGET', KEYS[1], ARGV[1])
if not list then return {} end
local out = {}
for rank in string.gmatch(list, '[^,]+') do
  out[#out + 1] = rank
  out[#out + 1] = st_get(rank) or 'p'
end
return out
`)

// rerankScript gives a claim a new rank because the one it was answered
// with is held in the database by another user's claim: Redis lost writes,
// and the rank was handed out twice. The claim keeps its user and slot; its
// rank in the user's list is replaced by the new one, and a new work-stream
// entry carries it under the new rank's claim id. A re-rank is recorded, so
// a redelivery of the old entry gets the same new rank, never a second one.
//
// KEYS: meta, seq, status, byuser, stream, reranks, status bytes.
// ARGV: old rank, user, slot, accepted at (ms), promotion id, fence (the
// database's highest rank).
//
// Returns {"ok", rank, fresh (0|1)}, {"lost", seq} when the rank counter is
// below the fence (the promotion is marked rebuilding, as by claimScript),
// {"rebuilding"} while it is rebuilding, {"sold_out"} when no unit is left to
// give it, or {"not_found"}. The new entry's claim_id is <promotion>#<rank>,
// as ClaimID builds it (ids.go).
var rerankScript = newScript(`-- dibs:rerank v2` + layoutLua + `
local done = redis.call('HGET', KEYS[6], ARGV[1] .. ':' .. ARGV[2])
if done then return {'ok', tonumber(done), 0} end
local m = redis.call('HMGET', KEYS[1], 'stock', 'voided', 'paused', 'mode')
if not m[1] then return {'not_found'} end
st_mode(m[4], KEYS[3], KEYS[7])
if m[3] == '1' then return {'rebuilding'} end
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
if seq < tonumber(ARGV[6]) then
  redis.call('HSET', KEYS[1], 'paused', 1)
  return {'lost', seq}
end
if seq - tonumber(m[2] or '0') >= tonumber(m[1]) then return {'sold_out'} end
local rank = redis.call('INCR', KEYS[2])
st_set(rank, 'p')
local rs, replaced = {}, false
local list = redis.call('HGET', KEYS[4], ARGV[2])
if list then
  for r in string.gmatch(list, '[^,]+') do
    if r == ARGV[1] and not replaced then
      rs[#rs + 1] = tostring(rank)
      replaced = true
    else
      rs[#rs + 1] = r
    end
  end
end
if not replaced then rs[#rs + 1] = tostring(rank) end
redis.call('HSET', KEYS[4], ARGV[2], table.concat(rs, ','))
redis.call('HSET', KEYS[6], ARGV[1] .. ':' .. ARGV[2], rank)
redis.call('XADD', KEYS[5], '*', 'claim_id', ARGV[5] .. '#' .. rank, 'user', ARGV[2],
  'rank', rank, 'slot', ARGV[3], 'at', ARGV[4], 'rerank_of', ARGV[1])
return {'ok', rank, 1}
`)

// collisionScript is run when the database shows that a claim's rank or
// slot was handed out twice: proof that Redis lost writes. It makes sure the
// promotion's counters were rebuilt after the claim was accepted before
// anything is settled on them: if they were not (no rebuilt_ms later than
// the claim's acceptance), it marks the promotion rebuilding.
//
// KEYS: meta. ARGV: the claim's acceptance time (ms, Redis TIME).
// Returns "ok" (rebuilt since), "rebuilding" (rebuilding now) or "lost" (it
// marked the promotion rebuilding), or "not_found".
var collisionScript = newScript(`-- dibs:collision v1
local m = redis.call('HMGET', KEYS[1], 'stock', 'paused', 'rebuilt_ms')
if not m[1] then return 'not_found' end
if m[2] == '1' then return 'rebuilding' end
if tonumber(m[3] or '0') > tonumber(ARGV[1]) then return 'ok' end
redis.call('HSET', KEYS[1], 'paused', 1)
return 'lost'
`)
