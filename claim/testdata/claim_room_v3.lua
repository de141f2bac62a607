-- dibs:claim_room v3
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

local function wr_pass_check(passes, pass, user, now)
  local v = redis.call('HGET', passes, pass)
  if not v then return 'unknown' end
  local st, exp, owner = string.match(v, '^(%a):(%d+):(.*)$')
  if owner ~= user then return 'not_yours' end
  if st == 's' then return 'spent' end
  if st ~= 'u' or tonumber(exp) <= now then return 'expired' end
  return nil
end
local function wr_pass_spend(passes, live, meta, pass)
  local v = redis.call('HGET', passes, pass)
  redis.call('HSET', passes, pass, 's' .. string.sub(v, 2))
  redis.call('ZREM', live, pass)
  redis.call('HINCRBY', meta, 'spent', 1)
end
local m = redis.call('HMGET', KEYS[1], 'stock', 'limit', 'starts_ms', 'ends_ms', 'closed', 'voided', 'mode', 'paused', 'held')
if not m[1] then return {'not_found'} end
local mode = st_mode(m[7], KEYS[4], KEYS[8])
if mode ~= 'first_come' then return {'wrong_mode'} end
if m[8] == '1' then return {'rebuilding'} end
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
local room = redis.call('EXISTS', KEYS[11]) == 1
if room then
  if (ARGV[5] or '') == '' then return {'not_admitted', 'none'} end
  local refused = wr_pass_check(KEYS[9], ARGV[5], user, now)
  if refused then return {'not_admitted', refused} end
end
local list = redis.call('HGET', KEYS[5], user)
local count = held(KEYS[3], user, list)
if count >= tonumber(m[2]) then return {'already_claimed'} end
local stock = tonumber(m[1])
local voided = tonumber(m[6] or '0')
if seq - voided >= stock then return {'sold_out'} end
local rank = redis.call('INCR', KEYS[2])
local slot = count + 1
if not st_compact then redis.call('HSET', KEYS[3], user, slot) end
st_set(rank, 'p')
if list then list = list .. ',' .. rank else list = tostring(rank) end
redis.call('HSET', KEYS[5], user, list)
if idem ~= '' then redis.call('HSET', KEYS[6], user .. '\n' .. idem, rank .. ':' .. slot) end
redis.call('XADD', KEYS[7], '*', 'claim_id', ARGV[3] .. '#' .. rank, 'user', user,
  'rank', rank, 'slot', slot, 'at', now)
if room then wr_pass_spend(KEYS[9], KEYS[10], KEYS[11], ARGV[5]) end
return {'ok', rank, 0, slot, stock - (rank - voided), now}
