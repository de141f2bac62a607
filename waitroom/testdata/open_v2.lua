-- dibs:wr_open v2
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
