package claim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dibsio/dibs/keyspace"
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
func (k Keys) StatusBytes() string { return k.space.Key(keyspace.StatusBytes) }

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

// LayoutLua is the source of layoutLua, for scripts outside the gate that
// read a user's count of claims exactly as the claim scripts' per-user
// limit check does, in either layout (the waiting room's join script). Such
// a script includes it after its first line, calls st_mode(mode) with the
// meta hash's mode, then held(users, user, list) with the Users key and the
// user's field of ByUser. A change of it is a change of every script that
// includes it, which each takes a new version.
const LayoutLua = layoutLua

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

// sightSpan bounds the span of ranks (highest less lowest, beyond 16 per
// claim asked about) that Sightings reads as one range of status bytes;
// a query spread wider reads the bytes rank by rank.
const sightSpan = 4096

// fieldChunk bounds the fields of one HMGET of Sightings.
const fieldChunk = 100

// Sightings reads, for each query, what Redis holds of its claims, in one
// pipelined round trip of plain reads, whatever the promotion's layout: per
// query, its meta hash's mode, the ranks' fields of the status hash, the
// users' fields of byuser (one HMGET per fieldChunk fields, so no read holds
// Redis long) and the ranks' status bytes (one GETRANGE over the ranks'
// span, or one per rank if the ranks are spread far apart). Keep a query's
// claims to about a thousand. A query whose reads failed gets nil and its
// error.
func (g *Gate) Sightings(ctx context.Context, qs []Sighted) ([][]Sighting, []error) {
	out, errs := make([][]Sighting, len(qs)), make([]error, len(qs))
	type span struct {
		from   int   // index of the query's first command
		reads  int   // its commands
		lo     int64 // lowest rank; -1 when the bytes are read rank by rank
		chunks int   // HMGETs of each hash
	}
	spans := make([]span, len(qs))
	var cmds rueidis.Commands
	for i, q := range qs {
		if len(q.Ranks) == 0 || len(q.Users) != len(q.Ranks) {
			errs[i] = fmt.Errorf("claims of %s: %d ranks, %d users", q.ID, len(q.Ranks), len(q.Users))
			continue
		}
		k := g.Keys(q.ID)
		ranks := formatInts(q.Ranks)
		lo, hi := q.Ranks[0], q.Ranks[0]
		for _, r := range q.Ranks {
			lo, hi = min(lo, r), max(hi, r)
		}
		spans[i] = span{from: len(cmds), lo: lo, chunks: (len(ranks) + fieldChunk - 1) / fieldChunk}
		cmds = append(cmds, g.client.B().Hget().Key(k.Meta()).Field(keyspace.FieldMode).Build())
		for _, part := range fieldChunks(ranks) {
			cmds = append(cmds, g.client.B().Hmget().Key(k.Status()).Field(part...).Build())
		}
		for _, part := range fieldChunks(q.Users) {
			cmds = append(cmds, g.client.B().Hmget().Key(k.ByUser()).Field(part...).Build())
		}
		if hi-lo <= sightSpan+16*int64(len(q.Ranks)) {
			cmds = append(cmds, g.client.B().Getrange().Key(k.StatusBytes()).Start(lo).End(hi).Build())
		} else {
			spans[i].lo = -1
			for _, r := range q.Ranks {
				cmds = append(cmds, g.client.B().Getrange().Key(k.StatusBytes()).Start(r).End(r).Build())
			}
		}
		spans[i].reads = len(cmds) - spans[i].from
	}
	if len(cmds) == 0 {
		return out, errs
	}
	res := g.client.DoMulti(ctx, cmds...)
	for i, q := range qs {
		if errs[i] != nil {
			continue
		}
		sp := spans[i]
		ss, err := sightings(q, res[sp.from:sp.from+sp.reads], sp.chunks, sp.lo)
		if err != nil {
			errs[i] = fmt.Errorf("claims of %s: %w", q.ID, err)
			continue
		}
		out[i] = ss
	}
	return out, errs
}

// fieldChunks cuts fields into pieces of at most fieldChunk, in order.
func fieldChunks(fields []string) [][]string {
	var out [][]string
	for len(fields) > 0 {
		n := min(len(fields), fieldChunk)
		out = append(out, fields[:n:n])
		fields = fields[n:]
	}
	return out
}

// joinArrays reads replies that are arrays as one array.
func joinArrays(res []rueidis.RedisResult) ([]rueidis.RedisMessage, error) {
	var out []rueidis.RedisMessage
	for _, r := range res {
		vs, err := r.ToArray()
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// sightings reads the replies of one query of Sightings: mode, the status
// hash's fields and byuser's fields (chunks HMGETs each), then one GETRANGE
// from rank lo, or one per rank if lo is -1.
func sightings(q Sighted, res []rueidis.RedisResult, chunks int, lo int64) ([]Sighting, error) {
	mode, err := res[0].ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		return nil, err
	}
	statuses, err1 := joinArrays(res[1 : 1+chunks])
	lists, err2 := joinArrays(res[1+chunks : 1+2*chunks])
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	bytesAt := 1 + 2*chunks // the first GETRANGE's reply
	if len(statuses) != len(q.Ranks) || len(lists) != len(q.Users) {
		return nil, errors.New("short reply")
	}
	compact := strings.HasSuffix(mode, LayoutCompact.suffix())
	var bytes string
	if compact && lo >= 0 {
		if bytes, err = res[bytesAt].ToString(); err != nil {
			return nil, err
		}
	}
	out := make([]Sighting, len(q.Ranks))
	for n, r := range q.Ranks {
		s := &out[n]
		switch {
		case !compact:
			s.Status, _ = statuses[n].ToString()
		case lo >= 0:
			if at := r - lo; at < int64(len(bytes)) {
				s.Status = bytes[at : at+1]
			}
		default:
			if s.Status, err = res[bytesAt+n].ToString(); err != nil {
				return nil, err
			}
		}
		if s.Status == "\x00" {
			s.Status = ""
		}
		list, _ := lists[n].ToString()
		rank := strconv.FormatInt(r, 10)
		for part := range strings.SplitSeq(list, ",") {
			if part == rank {
				s.Listed = true
				break
			}
		}
	}
	return out, nil
}
