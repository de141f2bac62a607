package waitroom

import (
	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/roompass"
)

// The room scripts (open, join, status, tick) take the keys of Keys.room, in
// this order:
//
//	KEYS[1] Meta   KEYS[2] Seq      KEYS[3] Place   KEYS[4] ByPlace
//	KEYS[5] Seen   KEYS[6] Admitted KEYS[7] Passes  KEYS[8] Live
//	KEYS[9] ClaimMeta               KEYS[10] ClaimSeq
//	KEYS[11] Prequeue
//
// and the join script two more (Keys.join): KEYS[12] ClaimByUser,
// KEYS[13] ClaimUsers. All carry the promotion's hash tag, so each script
// touches one slot.
//
// A script whose source starts with a line "-- dibs:<name> v<n>" is named
// and versioned as the claim package's are (see its doc): its KEYS, ARGV
// and reply change only under a new version, and the keys it shares with
// the previous release keep their meaning and format, so both releases'
// scripts run side by side on one Redis during a rolling upgrade. A room
// script without that line is its version 1.

// prelude holds the Lua helpers the room scripts share.
//
// room_state reads the promotion's claim meta and rank counter against
// Redis TIME: the state ('open', 'paused', 'sold_out', 'ended' or
// 'not_found'; paused is an admin's pause, claim meta held = 1, or a
// rebuild's, paused = 1), the stock remaining (stock + voided − seq, at least 0) and
// the live passes (unspent and unexpired). Sold out means nothing remains
// and no live pass may give a unit back.
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
// found the promotion paused, else 0)}.
//
// room_meta reads the room's meta hash: rate, open_ms, ttl_ms, abandon_ms,
// admitted, cursor, m_rate, skipped, m_ms, m_cur, pq (nil without a
// prequeue, else open, sealed or done) and pq_from.
const prelude = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local paused = 0
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
local function standing(user, now, abandon, pq)
  local adm = redis.call('HGET', KEYS[6], user)
  if adm then
    local pass, exp = string.match(adm, '^(%d+):(%d+)$')
    local p = redis.call('HGET', KEYS[7], pass) or 'x'
    local st = string.sub(p, 1, 1)
    if st == 's' then return 'used', 0, tonumber(pass), tonumber(exp) end
    if st == 'u' and tonumber(exp) > now then return 'admitted', 0, tonumber(pass), tonumber(exp) end
    return 'expired', 0, tonumber(pass), tonumber(exp)
  end
  local place = redis.call('HGET', KEYS[3], user)
  local seen = redis.call('HGET', KEYS[5], user)
  if place then
    if tonumber(seen or '0') + abandon <= now then return 'abandoned', 0, 0, 0 end
    return 'waiting', tonumber(place), 0, 0
  end
  if pq and pq ~= 'done' and redis.call('SISMEMBER', KEYS[11], user) == 1 then
    if tonumber(seen or '0') + abandon <= now then return 'abandoned', 0, 0, 0 end
    return 'prequeue', 0, 0, 0
  end
  if seen then return 'abandoned', 0, 0, 0 end
  return 'not_joined', 0, 0, 0
end
local function reply(st, place, pass, exp, now, remaining, live, m)
  return {st, place, tonumber(m[6] or '0'), pass, exp, remaining, live, now,
    tonumber(m[1]), m[7] or '', tonumber(m[2]), paused}
end
local function room_meta()
  return redis.call('HMGET', KEYS[1], 'rate', 'open_ms', 'ttl_ms', 'abandon_ms',
    'admitted', 'cursor', 'm_rate', 'skipped', 'm_ms', 'm_cur', 'pq', 'pq_from')
end
`

// openScript creates a room, or updates the settings of one that exists.
//
// KEYS: Meta, ClaimMeta. ARGV: rate (users per second), entry ttl (ms),
// abandon after (ms), opening (ms; 0 means the promotion's starts_ms, or
// Redis TIME when the claim meta is missing), prequeue from (ms; 0 for no
// prequeue), the shuffle's seed (hex; "" without a prequeue), the most
// live passes at once (0 for no cap), the message to the line ("" for
// none), the proof-of-work difficulty (0 for none).
//
// The rate, the opening and the prequeue are set when the room is
// created, so the admission count stays a function of time alone and the
// seed cannot change after its hash was shown; an update changes the entry
// ttl and the abandonment time. The rate, the cap, the message and the
// difficulty change only through leversScript (a PATCH): an instance that
// opens an existing room from a definition it read before a change must not
// undo it. A room with a prequeue starts with pq = open. Returns 1 if the
// room was created, 0 if it existed.
//
// Version 2 (the first one was unnamed) writes max_active, msg and pow at
// creation; rooms made by version 1 have none of them: no cap, no message,
// no proof of work.
var openScript = rueidis.NewLuaScript(`-- dibs:wr_open v2
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
redis.call('HSET', KEYS[1], 'rate', ARGV[1], 'ttl_ms', ARGV[2], 'abandon_ms', ARGV[3],
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
// (join v3, status v2): it makes reply append the room's message to the
// line (the meta's msg, "" for none) as the 13th value.
const withMessage = `
local reply12 = reply
reply = function(...)
  local r = reply12(...)
  r[13] = redis.call('HGET', KEYS[1], 'msg') or ''
  return r
end
`

// joinScript puts a user in line, idempotently.
//
// KEYS: see above (Keys.join), then KEYS[14] the key that marks the
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
// layout). Returns the reply of the prelude with the message (withMessage),
// or {outcome} with outcome not_found, ended or sold_out (no new place is
// handed out when nobody can be let in), or {'challenge', difficulty[,
// 'spent']}.
//
// Proof of work: while the meta's pow is above 0, a join (past the checks
// of not_found, ended and not_started) needs a solved challenge of at
// least that difficulty, and spends it (SET NX of KEYS[14] with the given
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
// Version 3 adds the proof of work, KEYS[14], ARGV[2] and ARGV[3], and the
// message; it writes the keys as version 2 did (which gave a user below the
// per-user limit a new place where the unnamed version 1 answered 'used').
// A version 2 join of the previous release takes no challenge.
var joinScript = rueidis.NewLuaScript("-- dibs:wr_join v3" + claim.LayoutLua + prelude + withMessage + `
local function below_limit(user)
  local c = redis.call('HMGET', KEYS[9], 'limit', 'mode')
  st_mode(c[2])
  return held(KEYS[13], user, redis.call('HGET', KEYS[12], user)) < tonumber(c[1] or '1')
end
local m = room_meta()
if not m[1] then return {'not_found'} end
local now = now_ms()
local state, remaining, live = room_state(now)
if state == 'not_found' or state == 'ended' then return {state} end
local user = ARGV[1]
local pq = m[11]
if pq and pq ~= 'done' and now < tonumber(m[12]) then return {'not_started'} end
local pow = tonumber(redis.call('HGET', KEYS[1], 'pow') or '0')
if pow > 0 then
  if tonumber(ARGV[2]) < pow then return {'challenge', pow} end
  if not redis.call('SET', KEYS[14], '1', 'NX', 'PX', ARGV[3]) then return {'challenge', pow, 'spent'} end
end
if pq and pq ~= 'done' then
  if pq == 'open' or (redis.call('SISMEMBER', KEYS[11], user) == 1 and redis.call('HEXISTS', KEYS[3], user) == 0) then
    redis.call('SADD', KEYS[11], user)
    redis.call('HSET', KEYS[5], user, now)
    return reply('prequeue', 0, 0, 0, now, remaining, live, m)
  end
end
local st, place, pass, exp = standing(user, now, tonumber(m[4]), pq)
if st == 'used' and below_limit(user) then st = 'again' end
if st == 'admitted' or st == 'used' then return reply(st, 0, pass, exp, now, remaining, live, m) end
if st == 'waiting' then
  redis.call('HSET', KEYS[5], user, now)
  return reply(st, place, 0, 0, now, remaining, live, m)
end
if state == 'sold_out' then return {'sold_out'} end
place = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[3], user, place)
redis.call('HSET', KEYS[4], place, user)
redis.call('HSET', KEYS[5], user, now)
redis.call('HDEL', KEYS[6], user)
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
// Version 2 (the first one was unnamed) appends the message to the line
// (withMessage); it reads and writes what version 1 did.
var statusScript = rueidis.NewLuaScript("-- dibs:wr_status v2" + prelude + withMessage + `
local m = room_meta()
if not m[1] then return {'not_found'} end
local now = now_ms()
local state, remaining, live = room_state(now)
if state == 'not_found' then return {state} end
local user = ARGV[1]
local st, place, pass, exp = standing(user, now, tonumber(m[4]), m[11])
if st == 'not_joined' then return {st} end
if st ~= 'used' then
  if state == 'ended' then
    st = 'ended'
  elseif state == 'sold_out' and st ~= 'admitted' then
    st = 'sold_out'
  end
end
if (st == 'waiting' or st == 'prequeue') and ARGV[2] == '1' then redis.call('HSET', KEYS[5], user, now) end
return reply(st, place, pass, exp, now, remaining, live, m)
`)

// tickScript advances admission to what Redis TIME allows.
//
// KEYS: see above. ARGV: the most places to examine, and the most expired
// passes to reclaim, in this call; the caller's tick interval (ms).
//
// It first reclaims expired unspent passes (marks them x; their units count
// as available again at once, since only unexpired passes count as live).
// Then, if the promotion is open, it lets in users in order of place, up to
// the room's allowance and the stock. The allowance, in thousandths of a
// user, is
//
//	credit = rate × (now − open_ms) − 1000 × admitted
//
// (open_ms is the opening until admission first moves it: from then on it
// is the time the allowance counts from), capped at
//
//	cap = max(2 × rate × tick, rate × tick + 1000)
//
// — one tick's worth carried and the tick's own — so time when no tick ran
// is not paid back at once. The tick lets in at most
// min(⌊min(credit, cap) / 1000⌋, remaining − live, max_active − live)
// users, where remaining = stock + voided − seq from the claim keys, live
// the unspent unexpired passes and max_active the meta's cap on live passes
// (none when absent or 0). The allowance left is then what was not used, or, if admission
// passed the last place (nobody waits), only its fraction of a user: no
// allowance is banked while the line is empty. open_ms moves forward so
// that credit is that allowance left at now, rounded down by less than one
// ms of allowance; it never moves back. A tick whose allowance was neither
// capped nor dropped leaves open_ms alone, so while users wait and ticks
// come in time admission is exactly ⌊rate × (now − opening)⌋, as in v1.
// In any span of T seconds a room admits at most rate × T + cap / 1000
// users, whoever ticks it (proof in docs/waitroom.md).
//
// A paused promotion (an admin's pause or a rebuild's) admits nobody; its
// first paused tick records held_ms = now, and the first tick after the
// resume moves open_ms on by now − held_ms, so the time of the pause adds
// nothing to the allowance. A user reached who stopped checking in for
// abandon_ms, or who took a later place since, is skipped (counted in
// skipped) and costs no admission. Since the allowance is a function of
// Redis TIME and the stored open_ms and total, concurrent ticks never admit
// twice. Each admitted user gets the next pass id, expiring ttl_ms after
// now. The state is v1's (no field was added), so v1 ticking the same room
// reads the allowance this version left, without the cap.
//
// The rate may change while the room runs: leversScript re-bases open_ms
// with it, so credit is the same just before and just after the change.
//
// With a prequeue not yet shuffled, a tick at or after open_ms first seals
// it (pq open → sealed): pq_n = SCARD of Prequeue (frozen from then on),
// pq_base = Seq, Seq += pq_n (the shuffle's places, base+1..base+pq_n, are
// reserved, so joins from then on take places after them) and pq_next = 0
// (places assigned so far). Until assignScript has assigned them all
// (pq done) it admits nobody and returns {'shuffle'}: the caller shuffles
// and ticks again. An empty prequeue is done at once.
//
// Returns {state, now, admitted, cursor, skipped, allowed, remaining, live,
// then user, pass id, expiry (ms) for each user admitted by this call}, with
// state one of open, paused, sold_out, ended and allowed the admissions the
// capped allowance allows in total (admitted before the call + ⌊allowance⌋);
// or {'not_found'} or {'shuffle'}.
var tickScript = rueidis.NewLuaScript(tickSource)

// tickSource is the tick script's source. Version 1, which had no header
// line, admitted ⌊rate × (now − open_ms)⌋ in total with no cap (kept in
// testdata/room_tick_v1.lua for the test of both side by side); version 2
// (testdata/room_tick_v2.lua) is this one without max_active, which it
// ignores: a room ticked by the previous release is not held to the cap on
// live passes.
const tickSource = "-- dibs:room_tick v3" + prelude + `
local m = room_meta()
if not m[1] then return {'not_found'} end
local now = now_ms()
if m[11] and m[11] ~= 'done' and now >= tonumber(m[2]) then
  if m[11] == 'open' then
    local n = redis.call('SCARD', KEYS[11])
    local base = tonumber(redis.call('GET', KEYS[2]) or '0')
    redis.call('SET', KEYS[2], base + n)
    local pq = 'sealed'
    if n == 0 then pq = 'done' end
    redis.call('HSET', KEYS[1], 'pq', pq, 'pq_n', n, 'pq_base', base, 'pq_next', 0)
    if n > 0 then return {'shuffle'} end
  else
    return {'shuffle'}
  end
end
local batch = tonumber(ARGV[1])
local gone = redis.call('ZRANGEBYSCORE', KEYS[8], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
if #gone > 0 then
  local n = 0
  for _, p in ipairs(gone) do
    local v = redis.call('HGET', KEYS[7], p)
    if v and string.sub(v, 1, 1) == 'u' then
      redis.call('HSET', KEYS[7], p, 'x' .. string.sub(v, 2))
      n = n + 1
    end
  end
  redis.call('ZREM', KEYS[8], unpack(gone))
  if n > 0 then redis.call('HINCRBY', KEYS[1], 'expired', n) end
end
local state, remaining, live = room_state(now)
local rate, open = tonumber(m[1]), tonumber(m[2])
local ttl, abandon = tonumber(m[3]), tonumber(m[4])
local admitted, cursor, skipped = tonumber(m[5]), tonumber(m[6]), tonumber(m[8] or '0')
local held = tonumber(redis.call('HGET', KEYS[1], 'held_ms') or '0')
if state == 'paused' then
  if held == 0 then redis.call('HSET', KEYS[1], 'held_ms', now) end
elseif held > 0 then
  if now > held then
    open = open + now - held
    redis.call('HSET', KEYS[1], 'open_ms', open)
  end
  redis.call('HDEL', KEYS[1], 'held_ms')
end
local tick = tonumber(ARGV[3])
local cap = math.max(2 * rate * tick, rate * tick + 1000)
local credit, moved = 0, false
if now > open then
  if now - open > (cap + 1000 * admitted) / rate then
    credit, moved = cap, true
  else
    credit = rate * (now - open) - 1000 * admitted
    if credit > cap then credit, moved = cap, true end
  end
end
local allowed = admitted
if credit > 0 then allowed = admitted + (credit - credit % 1000) / 1000 end
local out = {state, now, 0, 0, 0, allowed, remaining, 0}
if state == 'open' then
  local want = math.min(allowed - admitted, remaining - live)
  local most = tonumber(redis.call('HGET', KEYS[1], 'max_active') or '0')
  if most > 0 then want = math.min(want, most - live) end
  local last = tonumber(redis.call('GET', KEYS[2]) or '0')
  local before = admitted
  local steps = 0
  while want > 0 and cursor < last and steps < batch do
    steps = steps + 1
    cursor = cursor + 1
    local user = redis.call('HGET', KEYS[4], cursor)
    redis.call('HDEL', KEYS[4], cursor)
    if user and redis.call('HGET', KEYS[3], user) == tostring(cursor) then
      redis.call('HDEL', KEYS[3], user)
      if tonumber(redis.call('HGET', KEYS[5], user) or '0') + abandon <= now then
        skipped = skipped + 1
      else
        local pass = redis.call('HINCRBY', KEYS[1], 'pass_seq', 1)
        local exp = now + ttl
        redis.call('HSET', KEYS[7], pass, 'u:' .. exp .. ':' .. user)
        redis.call('ZADD', KEYS[8], exp, pass)
        redis.call('HSET', KEYS[6], user, pass .. ':' .. exp)
        admitted = admitted + 1
        live = live + 1
        want = want - 1
        out[#out + 1] = user
        out[#out + 1] = pass
        out[#out + 1] = exp
      end
    else
      skipped = skipped + 1
    end
  end
  local left = credit - 1000 * (admitted - before)
  if cursor >= last and left >= 1000 then left, moved = left % 1000, true end
  if moved then
    local from = now - math.floor((left + 1000 * admitted) / rate)
    if from > open then redis.call('HSET', KEYS[1], 'open_ms', from) end
  end
end
local mark = tonumber(m[9] or '0')
if mark == 0 then
  redis.call('HSET', KEYS[1], 'm_ms', now, 'm_cur', cursor)
elseif now - mark >= 2000 then
  local r = (cursor - tonumber(m[10] or '0')) * 1000 / (now - mark)
  redis.call('HSET', KEYS[1], 'm_ms', now, 'm_cur', cursor, 'm_rate', tostring(r))
end
redis.call('HSET', KEYS[1], 'admitted', admitted, 'cursor', cursor, 'skipped', skipped)
out[3], out[4], out[5], out[8] = admitted, cursor, skipped, live
return out
`

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
const PassLua = roompass.Lua

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
