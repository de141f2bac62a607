-- dibs:wr_levers v1
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local m = redis.call('HMGET', KEYS[1], 'rate', 'open_ms', 'held_ms')
local rate, open = tonumber(m[1]), tonumber(m[2])
if ARGV[1] == '1' then
  local new = tonumber(ARGV[2])
  if new ~= rate then
    local at = now
    local held = tonumber(m[3] or '0')
    if held > 0 and held < at then at = held end
    if at > open then
      open = at - math.floor(rate * (at - open) / new)
      redis.call('HSET', KEYS[1], 'open_ms', open)
    end
    rate = new
    redis.call('HSET', KEYS[1], 'rate', rate)
  end
end
local function set(flag, field, value, none)
  if flag ~= '1' then return end
  if value == none then
    redis.call('HDEL', KEYS[1], field)
  else
    redis.call('HSET', KEYS[1], field, value)
  end
end
set(ARGV[3], 'max_active', ARGV[4], '0')
set(ARGV[5], 'msg', ARGV[6], '')
set(ARGV[7], 'pow', ARGV[8], '0')
return {'ok', rate, open, now}
