-- dibs:wr_status v2
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

local reply12 = reply
reply = function(...)
  local r = reply12(...)
  r[13] = redis.call('HGET', KEYS[1], 'msg') or ''
  return r
end

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
