-- dibs:room_tick v4
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

local m = room_meta()
if not m[1] then return {'not_found'} end
local now = now_ms()
if compact and m[17] then
  m[1] = m[17]
  redis.call('HSET', KEYS[1], 'rate2', m[1])
  redis.call('HDEL', KEYS[1], 'rate')
end
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
local want, last, steps = 0, 0, 0
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
  last = tonumber(redis.call('GET', KEYS[2]) or '0')
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
