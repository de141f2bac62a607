package redistest

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
)

// loseScript forgets every claim of one promotion from rank ARGV[1] on.
// KEYS: seq, users, byuser, status, stream, idem, status bytes (compact
// layout: the bytes from rank ARGV[1] on are zeroed).
const loseScript = `local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
local from = tonumber(ARGV[1])
for _, e in ipairs(redis.call('XRANGE', KEYS[5], '-', '+')) do
  local f = {}
  for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
  if tonumber(f.rank) >= from then
    redis.call('XDEL', KEYS[5], e[1])
    redis.call('HDEL', KEYS[2], f.user)
    redis.call('HDEL', KEYS[3], f.user)
    for _, ik in ipairs(redis.call('HKEYS', KEYS[6])) do
      if string.sub(ik, 1, #f.user + 1) == f.user .. '\n' then redis.call('HDEL', KEYS[6], ik) end
    end
  end
end
for r = from, seq do redis.call('HDEL', KEYS[4], tostring(r)) end
local n = redis.call('STRLEN', KEYS[7])
if n > from then redis.call('SETRANGE', KEYS[7], from, string.rep('\0', n - from)) end
if seq >= from then redis.call('SET', KEYS[1], from - 1) end
return 1`

// LoseClaimsFrom makes Redis forget every claim of the promotion whose keys
// are k from rank from on, in one script, as a crash under appendfsync
// everysec, a restore of an older snapshot or a failover to a lagging
// replica would: the rank counter goes back to from-1, and each claim's
// status, work-stream entry, and its user's count, list and
// Idempotency-Keys are gone. The users must hold no claim below from (their
// counts are deleted, not lowered), and the consumer group must not have
// read the entries (their pending records are left alone).
func LoseClaimsFrom(tb testing.TB, client rueidis.Client, k claim.Keys, from int64) {
	tb.Helper()
	err := client.Do(context.Background(), client.B().Eval().Script(loseScript).Numkeys(7).
		Key(k.Seq(), k.Users(), k.ByUser(), k.Status(), k.Stream(), k.Idem(), k.StatusBytes()).
		Arg(strconv.FormatInt(from, 10)).Build()).Error()
	if err != nil {
		tb.Fatalf("lose the claims from rank %d: %v", from, err)
	}
}
