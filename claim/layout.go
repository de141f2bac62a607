package claim

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// Layouts: how a promotion's claims are kept in Redis.
//
// A promotion's layout is fixed when its meta hash is created and recorded
// in the meta hash's mode field, so every script reads it with the mode it
// reads anyway:
//
//   - classic (layout 1, mode "first_come" or "grant"): the status hash
//     maps each rank to p, i:<unix ms>, f, v or r; the users hash maps each
//     user to the number of claims the user was accepted for; byuser maps
//     each user to the list of the user's ranks.
//   - compact (layout 2, mode "first_come:2" or "grant:2"): the status is
//     one byte per rank in a string (Keys.StatusBytes, offset = rank): p,
//     i (issued: when is the database's to say), f, v or r, a zero byte or
//     an offset past the end meaning Redis holds no status for the rank; no
//     users hash: a user's count is the number of ranks in the user's
//     byuser list.
//
// The previous release's claim and grant scripts compare the mode with
// "first_come" and "grant" exactly, so they answer wrong_mode to a compact
// promotion instead of writing classic records into it. Segments of a
// promotion with more than one (mode "segment") are classic.

// Layout is how a promotion's claims are kept in Redis; it is fixed when
// the promotion's meta hash is created.
type Layout int

// Layouts.
const (
	// LayoutDefault is the zero Layout: LayoutCompact.
	LayoutDefault Layout = iota
	// LayoutClassic keeps a status hash (rank → p, i:<unix ms>, f, v, r)
	// and a users hash of per-user counts: what earlier releases read and
	// write. Choose it for new promotions while instances of an earlier
	// release still run.
	LayoutClassic
	// LayoutCompact keeps one status byte per rank in a string and counts
	// a user's claims from the user's list of ranks: about half the memory
	// per claim, and fewer writes per claim and per issuance.
	LayoutCompact
)

// String names the layout as the meta hash's mode suffix does.
func (l Layout) String() string {
	if l == LayoutClassic {
		return "classic"
	}
	return "compact"
}

// suffix is what the layout appends to the meta hash's mode.
func (l Layout) suffix() string {
	if l == LayoutClassic {
		return ""
	}
	return ":2"
}

// StatusBytes is the string that holds one status byte per rank (at offset
// rank) in a promotion of the compact layout: p, i, f, v or r; a zero byte,
// or an offset past its end, means Redis holds no status for the rank.
func (k Keys) StatusBytes() string { return k.base + "st" }

// layoutLua is the part every script that reads or writes a claim's status
// or a user's count starts with (after its header line): st_mode reads the
// layout from the meta hash's mode and returns the mode without its layout
// suffix; st_get and st_set read and write a rank's status (false for
// none; a compact promotion keeps the first byte of the code, so an issued
// claim reads "i"); held returns a user's count, given the user's list.
const layoutLua = `
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
`

// Sighting is what Redis holds of one claim, as Gate.Sightings reads it.
type Sighting struct {
	// Status is the claim's status code: "" if Redis holds none for its
	// rank, else p (pending), f (failed), v (voided), r (revoked), or i
	// (compact layout) or i:<unix ms> (classic) for issued.
	Status string
	// Listed is whether the rank is in its user's list of ranks.
	Listed bool
}

// Sighted asks Gate.Sightings about claims of one promotion: Ranks[n] is
// a claim of Users[n].
type Sighted struct {
	ID    string
	Ranks []int64
	Users []string
}

// sightScript reads the statuses of ranks and whether each is in its
// user's list, in either layout.
//
// KEYS: meta, status, byuser, status bytes. ARGV: n, then n ranks, then n
// user ids (rank n is user n's).
//
// Returns n status codes ("" for none), then n flags (1 if the rank is in
// the user's list, else 0).
var sightScript = newReadOnlyScript(`-- dibs:sight v1` + layoutLua + `
st_mode(redis.call('HGET', KEYS[1], 'mode'), KEYS[2], KEYS[4])
local n = tonumber(ARGV[1])
local out = {}
for i = 1, n do out[i] = st_get(ARGV[1 + i]) or '' end
for i = 1, n do
  local rank, listed = ARGV[1 + i], 0
  local list = redis.call('HGET', KEYS[3], ARGV[1 + n + i])
  if list then
    for r in string.gmatch(list, '[^,]+') do
      if r == rank then listed = 1 break end
    end
  end
  out[n + i] = listed
end
return out
`)

// Sightings reads, for each query, what Redis holds of its claims, in one
// pipelined round trip: one script call per query, so keep each query's
// claims to about a thousand. A query whose call failed gets nil and its
// error.
func (g *Gate) Sightings(ctx context.Context, qs []Sighted) ([][]Sighting, []error) {
	out, errs := make([][]Sighting, len(qs)), make([]error, len(qs))
	if len(qs) == 0 {
		return out, errs
	}
	execs := make([]rueidis.LuaExec, len(qs))
	for i, q := range qs {
		k := g.Keys(q.ID)
		args := make([]string, 0, 1+2*len(q.Ranks))
		args = append(args, strconv.Itoa(len(q.Ranks)))
		args = append(args, formatInts(q.Ranks)...)
		args = append(args, q.Users...)
		execs[i] = rueidis.LuaExec{Keys: []string{k.Meta(), k.Status(), k.ByUser(), k.StatusBytes()}, Args: args}
	}
	for i, res := range sightScript.ExecMulti(ctx, g.client, execs...) {
		n := len(qs[i].Ranks)
		vals, err := res.ToArray()
		if err == nil && (len(qs[i].Users) != n || len(vals) != 2*n) {
			err = fmt.Errorf("%d ranks, %d users, %d replies", n, len(qs[i].Users), len(vals))
		}
		if err != nil {
			errs[i] = fmt.Errorf("claims of %s: %w", qs[i].ID, err)
			continue
		}
		ss := make([]Sighting, n)
		for j := range ss {
			ss[j].Status, _ = vals[j].ToString()
			listed, _ := vals[n+j].AsInt64()
			ss[j].Listed = listed == 1
		}
		out[i] = ss
	}
	return out, errs
}
