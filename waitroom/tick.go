package waitroom

import "github.com/redis/rueidis"

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
// A room admits nobody while an admin paused its promotion's claims or the
// promotion is rebuilding; its first paused tick records held_ms = now, and
// the first tick after the resume moves open_ms on by now − held_ms, so the
// time of the pause adds nothing to the allowance. A user reached who stopped checking in for
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
// A LayoutClassic room finds the user at each place in ByPlace (deleting
// the entries it passes) and checks it against Place; a LayoutCompact one
// reads the users in order from the head of Line (or from Shuffled while
// in a sealed prequeue's places: Line starts after them), one LRANGE per
// tick, checks each against the user's entry in User (deleted when the
// user is let in; an abandoned user's stays, its place now behind the
// cursor) and trims what it passed from Line. A LayoutCompact room whose
// meta holds a rate (written by the previous release's lever script,
// which knows no rate2) takes it as its rate2 first.
//
// Returns {state, now, admitted, cursor, skipped, allowed, remaining, live,
// joined, collected, then user, pass id, expiry (ms) for each user admitted
// by this call}, with state one of open, paused, sold_out, ended, allowed
// the admissions the capped allowance allows in total (admitted before the
// call + ⌊allowance⌋), joined the room's last place (Seq, read once in every
// branch: a sealing tick's reserved places included) and collected the
// users of a prequeue still open (SCARD of Prequeue, read only then; 0
// once sealed or without one); or {'not_found'} or {'shuffle'}.
var tickScript = rueidis.NewLuaScript(tickSource)

// tickSource is the tick script's source. Version 1, which had no header
// line, admitted ⌊rate × (now − open_ms)⌋ in total with no cap (kept in
// testdata/room_tick_v1.lua for the test of both side by side); version 2
// (testdata/room_tick_v2.lua) is version 3 without max_active, which it
// ignores: a room ticked by it is not held to the cap on live passes.
// Version 4 serves both layouts, and in a LayoutClassic room reads and
// writes what version 3 (testdata/room_tick_v3.lua) did. Version 5 is
// version 4 (testdata/room_tick_v4.lua) whose reply also carries the room's
// last place and an open prequeue's users, so that a tick tells the line's
// length; it reads and writes the same keys the same way, so the two tick a
// room side by side.
const tickSource = "-- dibs:room_tick v5" + prelude + `
local m = room_meta()
if not m[1] then return {'not_found'} end
local now = now_ms()
if compact and m[17] then
  m[1] = m[17]
  redis.call('HSET', KEYS[1], 'rate2', m[1])
  redis.call('HDEL', KEYS[1], 'rate')
end
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local collected = 0
if m[11] and m[11] ~= 'done' and now >= tonumber(m[2]) then
  if m[11] == 'open' then
    local n = redis.call('SCARD', KEYS[11])
    local base = last
    last = base + n
    redis.call('SET', KEYS[2], last)
    local pq = 'sealed'
    if n == 0 then pq = 'done' end
    redis.call('HSET', KEYS[1], 'pq', pq, 'pq_n', n, 'pq_base', base, 'pq_next', 0)
    if n > 0 then return {'shuffle'} end
  else
    return {'shuffle'}
  end
elseif m[11] == 'open' then
  collected = redis.call('SCARD', KEYS[11])
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
local out = {state, now, 0, 0, 0, allowed, remaining, 0, last, collected}
local want, steps = 0, 0
local function admit(user)
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
local function admit_classic()
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
        admit(user)
      end
    else
      skipped = skipped + 1
    end
  end
end
local function admit_compact()
  local q = redis.call('HMGET', KEYS[1], 'pq_base', 'pq_n')
  local base = tonumber(q[1] or '0')
  local pq_end = base + tonumber(q[2] or '0')
  local buf, bi, line, trim = {}, 1, false, 0
  while want > 0 and cursor < last and steps < batch do
    steps = steps + 1
    cursor = cursor + 1
    if bi > #buf then
      local n = math.min(batch - steps + 1, want + 64)
      line = cursor > pq_end
      if line then
        buf = redis.call('LRANGE', KEYS[13], trim, trim + n - 1)
      else
        local from = cursor - base - 1
        buf = redis.call('LRANGE', KEYS[14], from, math.min(from + n, pq_end - base) - 1)
      end
      bi = 1
    end
    local user = buf[bi]
    bi = bi + 1
    if line then trim = trim + 1 end
    local p, s = nil, nil
    if user then p, s = unentry(redis.call('HGET', KEYS[12], user)) end
    if p ~= cursor then
      skipped = skipped + 1
    elseif s + abandon <= now then
      skipped = skipped + 1
    else
      redis.call('HDEL', KEYS[12], user)
      admit(user)
    end
  end
  if trim > 0 then redis.call('LTRIM', KEYS[13], trim, -1) end
end
if state == 'open' then
  want = math.min(allowed - admitted, remaining - live)
  local most = tonumber(redis.call('HGET', KEYS[1], 'max_active') or '0')
  if most > 0 then want = math.min(want, most - live) end
  local before = admitted
  if compact then admit_compact() else admit_classic() end
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
