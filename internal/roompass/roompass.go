// Package roompass holds the Lua source of the waiting room's single-use
// pass check, shared by the waitroom package (which documents it as
// waitroom.PassLua) and the claim package's claim script for promotions
// with a waiting room, which cannot import waitroom (waitroom's tests use
// claim).
package roompass

// Lua defines wr_pass_check and wr_pass_spend; see waitroom.PassLua.
const Lua = `
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
