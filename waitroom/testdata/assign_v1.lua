
local m = redis.call('HMGET', KEYS[1], 'pq', 'pq_next', 'pq_n', 'pq_base')
if m[1] ~= 'sealed' then return -1 end
local nxt, n, base = tonumber(m[2]), tonumber(m[3]), tonumber(m[4])
if nxt ~= tonumber(ARGV[1]) then return nxt end
if nxt + #ARGV - 1 > n then return redis.error_reply('ERR chunk runs past the prequeue') end
for i = 2, #ARGV do
  if redis.call('SISMEMBER', KEYS[5], ARGV[i]) == 0 then
    return redis.error_reply('ERR not in the prequeue: ' .. ARGV[i])
  end
end
for i = 2, #ARGV do
  nxt = nxt + 1
  local place = base + nxt
  redis.call('HSET', KEYS[2], ARGV[i], place)
  redis.call('HSET', KEYS[3], place, ARGV[i])
  redis.call('RPUSH', KEYS[4], ARGV[i])
end
if nxt >= n then
  redis.call('HSET', KEYS[1], 'pq_next', nxt, 'pq', 'done')
else
  redis.call('HSET', KEYS[1], 'pq_next', nxt)
end
return nxt
