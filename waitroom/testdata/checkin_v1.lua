-- dibs:wr_checkin v1
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local abandon = tonumber(redis.call('HGET', KEYS[1], 'abandon_ms') or '0')
local out = {now}
local seen = {}
for _, user in ipairs(ARGV) do
  local place = redis.call('HGET', KEYS[2], user)
  local p = 0
  if place and tonumber(redis.call('HGET', KEYS[3], user) or '0') + abandon > now then
    p = tonumber(place)
    seen[#seen + 1] = user
    seen[#seen + 1] = now
  end
  out[#out + 1] = p
end
if #seen > 0 then redis.call('HSET', KEYS[3], unpack(seen)) end
return out
