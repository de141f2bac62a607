package waitroom

import (
	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/keyspace"
)

// The room scripts (join, status, tick, snapshot) take the keys of
// Keys.room, in this order:
//
//	KEYS[1] Meta   KEYS[2] Seq      KEYS[3] Place   KEYS[4] ByPlace
//	KEYS[5] Seen   KEYS[6] Admitted KEYS[7] Passes  KEYS[8] Live
//	KEYS[9] ClaimMeta               KEYS[10] ClaimSeq
//	KEYS[11] Prequeue               KEYS[12] User   KEYS[13] Line
//	KEYS[14] Shuffled
//
// and the join script two more (Keys.join): KEYS[15] ClaimByUser,
// KEYS[16] ClaimUsers. All carry the promotion's hash tag, so each script
// touches one slot. Each serves both layouts (see Layout), by the meta's
// layout field: Place, ByPlace and Seen in a LayoutClassic room, User and
// Line in a LayoutCompact one.
//
// A script whose source starts with a line "-- dibs:<name> v<n>" is named
// and versioned as the claim package's are (see its doc): its KEYS, ARGV
// and reply change only under a new version, and the keys it shares with
// the previous release keep their meaning and format, so both releases'
// scripts run side by side on one Redis during a rolling upgrade. A room
// script without that line is its version 1.

// entryLua holds the Lua helpers of a LayoutCompact user entry ("<place>:
// <seen>" in base 36, see Keys.User): entry(place, seen) writes one,
// unentry(v) reads one (nil, nil for none).
const entryLua = `
local B36 = '0123456789abcdefghijklmnopqrstuvwxyz'
local function b36(n)
  local s = ''
  repeat
    local d = n % 36
    s = string.sub(B36, d + 1, d + 1) .. s
    n = (n - d) / 36
  until n == 0
  return s
end
local function entry(place, seen) return b36(place) .. ':' .. b36(seen) end
local function unentry(v)
  if not v then return nil, nil end
  local i = string.find(v, ':', 1, true)
  return tonumber(string.sub(v, 1, i - 1), 36), tonumber(string.sub(v, i + 1), 36)
end
`

// prelude holds the Lua helpers the room scripts share.
//
// room_state reads the promotion's claim meta and rank counter against
// Redis TIME: the state ('open', 'paused', 'sold_out', 'ended' or
// 'not_found'; paused while an admin paused the claims, claim meta
// held = 1, or the promotion is rebuilding, paused = 1), the stock
// remaining (stock + voided − seq, at least 0) and
// the live passes (unspent and unexpired). Sold out means nothing remains
// and no live pass may give a unit back.
//
// room_meta reads the room's meta hash: rate, open_ms, ttl_ms, abandon_ms,
// admitted, cursor, m_rate, skipped, m_ms, m_cur, pq (nil without a
// prequeue, else open, sealed or done), pq_from, layout, rate2, pow, msg.
// In a LayoutCompact room (layout = 2) it sets compact, and m[1] is the
// rate kept in rate2 (m[17] what a previous release's lever left in rate,
// nil but for that).
//
// place_of reads a user's place (nil when the user holds none: never
// joined, let in, in a prequeue not yet placed, or passed by admission)
// and the time of the user's latest join or check-in (nil if none);
// check_in records that time, now, for a user at place (0: in a prequeue
// not yet placed).
//
// standing reads one user's place in the room: the status ('admitted',
// 'used', 'expired', 'waiting', 'prequeue', 'abandoned' or 'not_joined'),
// the place (0 when not waiting), the latest pass id and its expiry (0 when
// none). 'prequeue' is a user collected by the opening moment (pq is the
// meta's pq field: open or sealed) who has no place yet.
//
// reply builds the common answer of join and status:
// {status, place, cursor, pass id, expires ms, remaining, live, now ms,
// rate, measured rate (a string, places per second, "" when unmeasured),
// opening ms (the shuffle's time for 'prequeue'), paused (1 if room_state
// found the room paused, else 0)}.
const prelude = entryLua + `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local paused = 0
local compact = false
local function room_state(now)
  local live = redis.call('ZCOUNT', KEYS[8], '(' .. now, '+inf')
  local c = redis.call('HMGET', KEYS[9], 'stock', 'voided', 'closed', 'ends_ms', 'paused', 'held')
  if not c[1] then return 'not_found', 0, live end
  if c[3] == '1' or now >= tonumber(c[4]) then return 'ended', 0, live end
  local seq = tonumber(redis.call('GET', KEYS[10]) or '0')
  local remaining = tonumber(c[1]) + tonumber(c[2] or '0') - seq
  if remaining < 0 then remaining = 0 end
  if c[5] == '1' or c[6] == '1' then
    paused = 1
    return 'paused', remaining, live
  end
  if remaining == 0 and live == 0 then return 'sold_out', 0, live end
  return 'open', remaining, live
end
local function room_meta()
  local m = redis.call('HMGET', KEYS[1], 'rate', 'open_ms', 'ttl_ms', 'abandon_ms',
    'admitted', 'cursor', 'm_rate', 'skipped', 'm_ms', 'm_cur', 'pq', 'pq_from', 'layout', 'rate2',
    'pow', 'msg')
  if m[13] == '2' then
    compact = true
    m[17] = m[1]
    m[1] = m[14]
  end
  return m
end
local function place_of(user, cursor)
  if compact then
    local p, s = unentry(redis.call('HGET', KEYS[12], user))
    if p and p > cursor then return p, s end
    return nil, s
  end
  local p = redis.call('HGET', KEYS[3], user)
  local s = redis.call('HGET', KEYS[5], user)
  return tonumber(p), tonumber(s)
end
local function check_in(user, place, now)
  if compact then
    redis.call('HSET', KEYS[12], user, entry(place, now))
  else
    redis.call('HSET', KEYS[5], user, now)
  end
end
local function standing(user, now, abandon, pq, cursor)
  local adm = redis.call('HGET', KEYS[6], user)
  if adm then
    local pass, exp = string.match(adm, '^(%d+):(%d+)$')
    local p = redis.call('HGET', KEYS[7], pass) or 'x'
    local st = string.sub(p, 1, 1)
    if st == 's' then return 'used', 0, tonumber(pass), tonumber(exp) end
    if st == 'u' and tonumber(exp) > now then return 'admitted', 0, tonumber(pass), tonumber(exp) end
    return 'expired', 0, tonumber(pass), tonumber(exp)
  end
  local place, seen = place_of(user, cursor)
  if place then
    if (seen or 0) + abandon <= now then return 'abandoned', 0, 0, 0 end
    return 'waiting', place, 0, 0
  end
  if pq and pq ~= 'done' and redis.call('SISMEMBER', KEYS[11], user) == 1 then
    if (seen or 0) + abandon <= now then return 'abandoned', 0, 0, 0 end
    return 'prequeue', 0, 0, 0
  end
  if seen then return 'abandoned', 0, 0, 0 end
  return 'not_joined', 0, 0, 0
end
local function reply(st, place, pass, exp, now, remaining, live, m)
  return {st, place, tonumber(m[6] or '0'), pass, exp, remaining, live, now,
    tonumber(m[1]), m[7] or '', tonumber(m[2]), paused}
end
`

// openScript creates a room, or updates the settings of one that exists.
//
// KEYS: Meta, ClaimMeta, Place, ByPlace, Seen. ARGV: rate (users per
// second), entry ttl (ms), abandon after (ms), opening (ms; 0 means the
// promotion's starts_ms, or Redis TIME when the claim meta is missing),
// prequeue from (ms; 0 for no prequeue), the shuffle's seed (hex; ""
// without a prequeue), the most live passes at once (0 for no cap), the
// message to the line ("" for none), the proof-of-work difficulty (0 for
// none), the layout (1 or 2, see Layout).
//
// The rate, the opening, the prequeue and the layout are set when the room
// is created, so the admission count stays a function of time alone and
// the seed cannot change after its hash was shown; an update changes the
// entry ttl and the abandonment time. The rate, the cap, the message and
// the difficulty change only through leversScript (a PATCH): an instance
// that opens an existing room from a definition it read before a change
// must not undo it. A room with a prequeue starts with pq = open. Returns 1
// if the room was created, 0 if it existed.
//
// A LayoutCompact room gets layout = 2 and its rate in rate2, not rate,
// and Place, ByPlace and Seen are set to marker strings: the previous
// release's room scripts read rate first and answer not_found without it,
// and any of them that reaches a marker with a hash command fails before
// it writes (see Layout).
//
// Version 3 adds the layout (KEYS[3..5], ARGV[10]); version 2 (the first
// one was unnamed) wrote max_active, msg and pow at creation, and version
// 1 none of them: no cap, no message, no proof of work. Each version's
// update of an existing room writes ttl_ms and abandon_ms alone, in either
// layout.
var openScript = rueidis.NewLuaScript(`-- dibs:wr_open v3
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'ttl_ms', ARGV[2], 'abandon_ms', ARGV[3])
  return 0
end
local open = tonumber(ARGV[4])
if open == 0 then
  local s = redis.call('HGET', KEYS[2], 'starts_ms')
  if s then
    open = tonumber(s)
  else
    local t = redis.call('TIME')
    open = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
end
local rate = 'rate'
if ARGV[10] == '2' then
  rate = 'rate2'
  redis.call('HSET', KEYS[1], 'layout', 2)
  for i = 3, 5 do redis.call('SET', KEYS[i], 'layout 2') end
end
redis.call('HSET', KEYS[1], rate, ARGV[1], 'ttl_ms', ARGV[2], 'abandon_ms', ARGV[3],
  'open_ms', open, 'admitted', 0, 'cursor', 0, 'skipped', 0, 'spent', 0, 'expired', 0, 'pass_seq', 0)
if ARGV[5] ~= '0' then
  redis.call('HSET', KEYS[1], 'pq', 'open', 'pq_from', ARGV[5], 'pq_seed', ARGV[6])
end
if ARGV[7] ~= '0' then redis.call('HSET', KEYS[1], 'max_active', ARGV[7]) end
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'msg', ARGV[8]) end
if ARGV[9] ~= '0' then redis.call('HSET', KEYS[1], 'pow', ARGV[9]) end
return 1
`)

// withMessage follows the prelude in the scripts that answer a standing
// (join v3 and later, status v2 and later): it makes reply append the
// room's message to the line (the meta's msg, "" for none, as room_meta
// read it) as the 13th value.
const withMessage = `
local reply12 = reply
reply = function(st, place, pass, exp, now, remaining, live, m)
  local r = reply12(st, place, pass, exp, now, remaining, live, m)
  r[13] = m[16] or ''
  return r
end
`

// joinScript puts a user in line, idempotently.
//
// KEYS: see above (Keys.join), then KEYS[17] the key that marks the
// presented challenge spent (Keys.spentChallenge; any key of the room's
// slot when none is presented). ARGV: user id, the difficulty of the
// solved challenge presented (0 for none; checked in Go: signature, user,
// expiry, hash), how long to keep the spent mark (ms).
//
// A user already waiting (and not abandoned) keeps the place and checks in;
// an admitted user is answered as such. A user whose pass was spent is
// answered 'used' while the user's claims (counted as the claim script's
// per-user limit check counts them: held of the claim layout, from the
// claim meta's mode, ClaimByUser and ClaimUsers) reach the claim meta's
// limit; below it the user is one who may claim again. Such a user, and one
// who never joined, was skipped as abandoned, stopped checking in, or let a
// pass expire, takes a new place at the back: INCR of Seq, O(1) (reading
// the user's claims is O(1), or O(the user's claims) in the compact
// claim layout). A LayoutClassic room writes the place to Place, ByPlace
// and Seen, a LayoutCompact one to User and the tail of Line. Returns the
// reply of the prelude with the message (withMessage), or {outcome} with
// outcome not_found, ended or sold_out (no new place is handed out when
// nobody can be let in), or {'challenge', difficulty[, 'spent']}.
//
// Proof of work: while the meta's pow is above 0, a join (past the checks
// of not_found, ended and not_started) needs a solved challenge of at
// least that difficulty, and spends it (SET NX of KEYS[17] with the given
// expiry): one presented twice is refused, 'spent'. A join without one, or
// with an easier one, gets {'challenge', pow}. While pow is 0 a challenge
// presented is neither needed nor spent.
//
// With a prequeue not yet shuffled (pq open or sealed), a join before
// pq_from answers {'not_started'}; from pq_from until the tick seals the
// prequeue (pq open) a join adds the user to the Prequeue set (SADD, O(1),
// idempotent) and answers 'prequeue' with no place; a member joining again
// while the shuffle runs (pq sealed) checks in and stays 'prequeue', and a
// newcomer then takes a place after the shuffled ones.
//
// Version 4 serves both layouts; in a LayoutClassic room it reads and
// writes what version 3 did (testdata/join_v3.lua), which added the proof
// of work and the message; version 2 gave a user below the per-user limit
// a new place where the unnamed version 1 answered 'used'.
var joinScript = rueidis.NewLuaScript("-- dibs:wr_join v4" + claim.LayoutLua + prelude + withMessage + `
local function below_limit(user)
  local c = redis.call('HMGET', KEYS[9], 'limit', 'mode')
  st_mode(c[2])
  return held(KEYS[16], user, redis.call('HGET', KEYS[15], user)) < tonumber(c[1] or '1')
end
local m = room_meta()
if not m[1] then return {'not_found'} end
local now = now_ms()
local state, remaining, live = room_state(now)
if state == 'not_found' or state == 'ended' then return {state} end
local user = ARGV[1]
local pq, cursor = m[11], tonumber(m[6] or '0')
if pq and pq ~= 'done' and now < tonumber(m[12]) then return {'not_started'} end
local pow = tonumber(m[15] or '0')
if pow > 0 then
  if tonumber(ARGV[2]) < pow then return {'challenge', pow} end
  if not redis.call('SET', KEYS[17], '1', 'NX', 'PX', ARGV[3]) then return {'challenge', pow, 'spent'} end
end
if pq and pq ~= 'done' then
  if pq == 'open' or (redis.call('SISMEMBER', KEYS[11], user) == 1 and not place_of(user, cursor)) then
    redis.call('SADD', KEYS[11], user)
    check_in(user, 0, now)
    return reply('prequeue', 0, 0, 0, now, remaining, live, m)
  end
end
local st, place, pass, exp = standing(user, now, tonumber(m[4]), pq, cursor)
if st == 'used' and below_limit(user) then st = 'again' end
if st == 'admitted' or st == 'used' then return reply(st, 0, pass, exp, now, remaining, live, m) end
if st == 'waiting' then
  check_in(user, place, now)
  return reply(st, place, 0, 0, now, remaining, live, m)
end
if state == 'sold_out' then return {'sold_out'} end
place = redis.call('INCR', KEYS[2])
if compact then
  redis.call('HSET', KEYS[12], user, entry(place, now))
  redis.call('RPUSH', KEYS[13], user)
else
  redis.call('HSET', KEYS[3], user, place)
  redis.call('HSET', KEYS[4], place, user)
  redis.call('HSET', KEYS[5], user, now)
end
if st == 'expired' or st == 'again' then redis.call('HDEL', KEYS[6], user) end
return reply('waiting', place, 0, 0, now, remaining, live, m)
`)

// statusScript answers a user's standing and, for a waiting user, records
// a check-in.
//
// KEYS: see above. ARGV: user id, check in (1 or 0).
//
// A promotion that ended answers 'ended', and one sold out 'sold_out', to
// every user who has not spent a pass, at once: the state is derived from
// the claim meta on every call. Returns the reply of the prelude with status
// one of waiting, prequeue, admitted, used, expired, abandoned, sold_out,
// ended; or {outcome} with outcome not_found or not_joined. A prequeue user
// checks in as a waiting one does. O(1) but for ZCOUNT's
// O(log n).
//
// Version 3 serves both layouts, and in a LayoutClassic room reads and
// writes what version 2 (testdata/status_v2.lua) did; version 2 (the
// first one was unnamed) appended the message to the line (withMessage).
var statusScript = rueidis.NewLuaScript("-- dibs:wr_status v3" + prelude + withMessage + `
local m = room_meta()
if not m[1] then return {'not_found'} end
local now = now_ms()
local state, remaining, live = room_state(now)
if state == 'not_found' then return {state} end
local user = ARGV[1]
local st, place, pass, exp = standing(user, now, tonumber(m[4]), m[11], tonumber(m[6] or '0'))
if st == 'not_joined' then return {st} end
if st ~= 'used' then
  if state == 'ended' then
    st = 'ended'
  elseif state == 'sold_out' and st ~= 'admitted' then
    st = 'sold_out'
  end
end
if (st == 'waiting' or st == 'prequeue') and ARGV[2] == '1' then check_in(user, place, now) end
return reply(st, place, pass, exp, now, remaining, live, m)
`)

// PassLua is the Lua source of the single-use pass check, for the claim
// script to include at its top so it spends a pass in the atomic step that
// takes the unit. It defines two local functions:
//
//	wr_pass_check(passes, pass, user, now) -> nil | outcome
//	wr_pass_spend(passes, live, meta, pass)
//
// passes, live and meta are the key names Keys.Passes, Keys.Live and
// Keys.Meta (pass them as KEYS, see Keys.SpendKeys); pass is the pass id
// from the verified token (decimal string), user the claiming user, now
// Redis TIME in ms. wr_pass_check returns nil for a live unspent pass of
// user, or one of 'unknown', 'not_yours', 'spent', 'expired'; it writes
// nothing. wr_pass_spend marks the pass spent, removes it from the live set
// and counts it in the room meta's spent field; call it only after
// wr_pass_check returned nil in the same script.
const PassLua = keyspace.RoomPassLua

// SpendScript checks that a pass is live, unspent and its user's, and marks
// it spent, in one step: the standalone form of PassLua.
//
// KEYS: Passes, Live, Meta (Keys.SpendKeys). ARGV: pass id, user id.
//
// Returns "ok" when it spent the pass, or one of "unknown", "not_yours",
// "spent", "expired" (nothing written). Expiry is judged against Redis
// TIME. Rooms.Spend runs it after verifying the token's signature.
var SpendScript = rueidis.NewLuaScript(PassLua + `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local r = wr_pass_check(KEYS[1], ARGV[1], ARGV[2], now)
if r then return r end
wr_pass_spend(KEYS[1], KEYS[2], KEYS[3], ARGV[1])
return 'ok'
`)

// leaseScript takes or renews a room's tick lease.
//
// KEYS: Lease. ARGV: holder id, ttl (ms). Returns 1 if the caller holds the
// lease for ttl from now, 0 if another holder has it.
var leaseScript = rueidis.NewLuaScript(`
local h = redis.call('GET', KEYS[1])
if h == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if h then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`)

// releaseScript gives a room's tick lease up if the caller holds it.
// KEYS: Lease. ARGV: holder id. Returns 1 if it released, 0 otherwise.
var releaseScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)
