-- dibs:wr_join v3
local st_compact, st_hash, st_bytes = false, nil, nil
local function st_mode(mode, hash, bytes)
  st_hash, st_bytes = hash, bytes
  if not mode then return mode end
  local base = string.match(mode, '^(.*):2$')
  st_compact = base ~= nil
  return base or mode
end
local function st_get(rank)
  if st_compact then
    local b = redis.call('GETRANGE', st_bytes, rank, rank)
    if b == '' or b == '\0' then return false end
    return b
  end
  return redis.call('HGET', st_hash, rank)
end
local function st_set(rank, code)
  if st_compact then
    redis.call('SETRANGE', st_bytes, rank, string.sub(code, 1, 1))
  else
    redis.call('HSET', st_hash, rank, code)
  end
end
local function held(users, user, list)
  if st_compact then
    if not list then return 0 end
    local _, n = string.gsub(list, ',', '')
    return n + 1
  end
  return tonumber(redis.call('HGET', users, user) or '0')
end

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
