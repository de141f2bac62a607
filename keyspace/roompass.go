package keyspace

// RoomPassLua defines the Lua functions wr_pass_check and wr_pass_spend of
// the waiting room's single-use pass, shared by the waiting room's spend
// script (waitroom.PassLua, which documents them) and the claim script of a
// promotion with a waiting room. A change of it is a change of every script
// that includes it, which each takes a new version.
const RoomPassLua = `
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
`
