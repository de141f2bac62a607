package claim_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/benchcpu"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// claimParts are the scripts of BenchmarkClaimScriptParts: each runs one
// step of the claim script (with INCR where the step needs a new rank) and
// answers 1, so its cost less the cost of "call" is what the step adds.
// KEYS and ARGV are the claim script's.
var claimParts = []struct{ name, lua string }{
	{"call", `return 1`},
	{"reply", `return {'ok', 1, 0, 1, 1, 1}`},
	{"hmget", `redis.call('HMGET', KEYS[1], 'stock', 'limit', 'starts_ms', 'ends_ms', 'closed', 'voided', 'mode', 'paused', 'held')
return 1`},
	{"get", `redis.call('GET', KEYS[2])
return 1`},
	{"time", `local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
return 1`},
	{"hget", `redis.call('HGET', KEYS[5], ARGV[1])
return 1`},
	{"incr", `redis.call('INCR', KEYS[2])
return 1`},
	{"incr+setrange", `redis.call('SETRANGE', KEYS[8], redis.call('INCR', KEYS[2]), 'p')
return 1`},
	{"incr+hset", `redis.call('HSET', KEYS[5], ARGV[1], redis.call('INCR', KEYS[2]))
return 1`},
	{"incr+hsetnx", `redis.call('HSETNX', KEYS[5], ARGV[1], redis.call('INCR', KEYS[2]))
return 1`},
	{"incr+xadd", `local rank = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[7], '*', 'claim_id', ARGV[3] .. '#' .. rank, 'user', ARGV[1],
  'rank', rank, 'slot', 1, 'at', 1700000000000)
return 1`},
}

// claimBatch is not a script of the gate: it takes the claims of several
// users (ARGV: promotion id, fence, users) in one call of a compact
// promotion with a per-user limit of 1, as a claim script that took a
// batch would, so BenchmarkClaimScriptParts can show what a call's fixed
// cost would weigh spread over several claims.
const claimBatch = `local m = redis.call('HMGET', KEYS[1], 'stock', 'limit', 'starts_ms', 'ends_ms', 'closed', 'voided', 'mode', 'paused', 'held')
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if now < tonumber(m[3]) or now >= tonumber(m[4]) then return 'ended' end
local stock, voided = tonumber(m[1]), tonumber(m[6] or '0')
local out, rank = {}, seq
for i = 3, #ARGV do
  local user = ARGV[i]
  if rank - voided >= stock then out[#out + 1] = 0
  elseif redis.call('HSETNX', KEYS[5], user, rank + 1) == 0 then out[#out + 1] = -1
  else
    rank = rank + 1
    redis.call('SETRANGE', KEYS[8], rank, 'p')
    redis.call('XADD', KEYS[7], '*', 'claim_id', ARGV[1] .. '#' .. rank, 'user', user,
      'rank', rank, 'slot', 1, 'at', now)
    out[#out + 1] = rank
  end
end
if rank > seq then redis.call('SET', KEYS[2], rank) end
out[#out + 1] = now
return out
`

// BenchmarkClaimScriptParts is the model of where Redis's CPU per claim
// goes: the claim scripts of the previous release (claim v4) and of this
// one (claim v5), each step of them alone (claimParts), and claimBatch
// taking 4 and 16 claims per call, each run like BenchmarkClaim (64 calls
// in flight over one pipelining client, a new user per claim, a compact
// promotion with a per-user limit of 1) on a single node. It reports
// redis-µs/claim (a call of the steps counts as one claim).
func BenchmarkClaimScriptParts(b *testing.B) {
	v4, err := os.ReadFile("testdata/claim_v4.lua")
	if err != nil {
		b.Fatal(err)
	}
	type script struct {
		name, lua string
		batch     int  // users per call; 0: the claim script's ARGV
		claims    bool // every call takes a unit per user
	}
	var scripts []script
	for _, p := range claimParts {
		scripts = append(scripts, script{p.name, p.lua, 0, false})
	}
	scripts = append(scripts, script{"claim-v4", string(v4), 0, true}, script{"claim-v5", claim.ClaimScriptSource(), 0, true},
		script{"batch-4", claimBatch, 4, true}, script{"batch-16", claimBatch, 16, true})
	tp := redistest.Topologies(b)[0]
	c, p := tp.Client(b), redistest.Prefix(b)
	f := fixture{gate: newGate(b, c, p), client: c, prefix: p, layout: claim.LayoutCompact}
	for i, s := range scripts {
		// Each run claims in a promotion of its own, all deleted at the
		// end: freeing one run's keys would be counted in the next's.
		id := "parts" + strconv.Itoa(i)
		b.Cleanup(func() { f.drop(b, id) })
		b.Run(s.name, func(b *testing.B) {
			benchScript(b, f, id, rueidis.NewLuaScript(s.lua), s.batch, s.claims)
		})
	}
}

// benchScript runs script b.N times (b.N × batch claims for a batch) on
// promotion id, as benchClaims runs Gate.Claim, and reports Redis's CPU
// per claim; with claims, it fails unless every user took a unit.
func benchScript(b *testing.B, f fixture, id string, script *rueidis.Lua, batch int, claims bool) {
	ctx := context.Background()
	if _, err := f.gate.Open(ctx, claim.Promotion{ID: id, Stock: 1_000_000_000, PerUserLimit: 1,
		StartsAt: time.Now().Add(-time.Minute), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	keys := claim.ClaimScriptKeys(f.prefix, id)
	if err := script.Exec(ctx, f.client, keys, []string{"warm", "", id, "0"}).Error(); err != nil && !rueidis.IsRedisNil(err) {
		b.Fatal(err)
	}
	var users atomic.Int64
	b.SetParallelism(max(1, benchInFlight/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	cpu := benchcpu.Start(f.client)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			args := []string{"", "", id, "0"}
			if batch == 0 {
				args[0] = "u" + strconv.FormatInt(users.Add(1), 10)
			} else {
				args = []string{id, "0"}
				for range batch {
					args = append(args, "u"+strconv.FormatInt(users.Add(1), 10))
				}
			}
			if err := script.Exec(ctx, f.client, keys, args).Error(); err != nil {
				b.Errorf("%v", err)
				return
			}
		}
	})
	b.StopTimer()
	cpu.Report(b, users.Load())
	if st, err := f.gate.State(ctx, id); err != nil || (claims && st.Seq < users.Load()) {
		b.Fatalf("rank counter %d after %d claims: %v", st.Seq, users.Load(), err)
	}
}
