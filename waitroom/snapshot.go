package waitroom

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// checkInBatch is the most users one check-in script call takes, so that
// a call holds Redis for well under half a millisecond.
const checkInBatch = 100

// snapshot is one read of a room: what every waiting user's standing
// depends on besides the user's own place. A place never changes while its
// user waits, and admission moves the line for everyone at once, so a
// snapshot and the place answer the standing of every waiting user.
type snapshot struct {
	state     string  // open, paused, sold_out, ended or not_found
	now       int64   // Redis TIME of the read, ms
	cursor    int64   // the last place admission has passed
	remaining int64   // stock + voided − seq, at least 0
	live      int64   // passes unspent and unexpired
	rate      int64   // admit_per_second
	measured  float64 // the measured speed of the line, places/s; 0 unmeasured
	abandon   time.Duration
	message   string // the room's message to the line, "" for none
}

// view is what a waiting user's answer shows of a snapshot; two snapshots
// of equal views give every waiting user the same answer but its Now.
type view struct {
	state             string
	cursor, available int64
	rate              int64
	measured          float64
	message           string
}

func (s *snapshot) view() view {
	return view{state: s.state, cursor: s.cursor, available: s.remaining - s.live, rate: s.rate, measured: s.measured,
		message: s.message}
}

// answer is the standing of a user who waits at place, as the status
// script answers it at the snapshot's cursor and time: waiting with the
// position and estimates (paused too), or sold out or ended for everyone.
// ok is false when the snapshot cannot tell: admission has reached the
// place (the user was let in, skipped, or left), or the room is gone. The
// caller vouches that the user was checked in within the room's
// abandonment time.
func (s *snapshot) answer(place int64) (st Standing, ok bool) {
	if place <= s.cursor {
		return Standing{}, false
	}
	now := time.UnixMilli(s.now).UTC()
	switch s.state {
	case "ended":
		return Standing{Status: StatusEnded, Now: now, Message: s.message}, true
	case "sold_out":
		return Standing{Status: StatusSoldOut, Now: now, Message: s.message}, true
	case "open", "paused":
	default:
		return Standing{}, false
	}
	pos := place - s.cursor
	return Standing{
		Status:              StatusWaiting,
		Place:               place,
		Position:            pos,
		Wait:                EstimateWait(pos, s.rate, s.measured),
		StockExpectedToLast: StockExpectedToLast(pos, s.remaining-s.live),
		Now:                 now,
		Paused:              s.state == "paused",
		Message:             s.message,
	}, true
}

// snapshotScript reads a room for a snapshot; it writes nothing.
//
// KEYS: see Keys.room. ARGV: none.
//
// Returns {state, now ms, cursor, remaining, live, rate, measured rate (a
// string, "" when unmeasured), abandon ms, message (the meta's msg, ""
// for none)}, the state as the status script derives it (open, paused,
// sold_out, ended, not_found); or {'not_found'} when the room is missing.
// O(log n) for ZCOUNT. Version 3 reads the rate of either layout (see
// Layout); version 2 (testdata/snapshot_v2.lua) read rate alone, so it
// answers not_found for a LayoutCompact room.
var snapshotScript = rueidis.NewLuaScript("-- dibs:wr_snapshot v3" + prelude + `
local m = room_meta()
if not m[1] then return {'not_found'} end
local now = now_ms()
local state, remaining, live = room_state(now)
return {state, now, tonumber(m[6] or '0'), remaining, live, tonumber(m[1]), m[7] or '', tonumber(m[4]),
  m[16] or ''}
`)

// checkInScript checks waiting users in, in one step for a batch of them.
//
// KEYS: Meta, Place, Seen, User. ARGV: user ids (at most checkInBatch).
//
// A user who holds a place and has not been abandoned (seen + abandon_ms >
// now, as the status script judges it) gets seen = now; others are left
// alone. Returns {now ms, then for each user its place, or 0 if the user
// no longer waits}. O(users).
//
// Version 2 serves both layouts (see Layout): Place and Seen in a
// LayoutClassic room, as version 1 (testdata/checkin_v1.lua) did, User in
// a LayoutCompact one, where a place behind the cursor is no longer held.
var checkInScript = rueidis.NewLuaScript("-- dibs:wr_checkin v2" + entryLua + `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local m = redis.call('HMGET', KEYS[1], 'abandon_ms', 'layout', 'cursor')
local abandon = tonumber(m[1] or '0')
local out = {now}
local seen = {}
if m[2] == '2' then
  local cursor = tonumber(m[3] or '0')
  for _, user in ipairs(ARGV) do
    local place, s = unentry(redis.call('HGET', KEYS[4], user))
    local p = 0
    if place and place > cursor and s + abandon > now then
      p = place
      seen[#seen + 1] = user
      seen[#seen + 1] = entry(place, now)
    end
    out[#out + 1] = p
  end
  if #seen > 0 then redis.call('HSET', KEYS[4], unpack(seen)) end
  return out
end
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
`)

// readSnapshot reads promotion id's room for a snapshot.
func (r *Rooms) readSnapshot(ctx context.Context, id string) (snapshot, error) {
	return decodeSnapshot(snapshotScript.Exec(ctx, r.client, r.Keys(id).room(), nil))
}

func decodeSnapshot(res rueidis.RedisResult) (snapshot, error) {
	vals, err := res.ToArray()
	if err != nil {
		return snapshot{}, err
	}
	if len(vals) == 0 {
		return snapshot{}, errors.New("empty snapshot reply")
	}
	var s snapshot
	if s.state, err = vals[0].ToString(); err != nil {
		return snapshot{}, err
	}
	if len(vals) == 1 {
		return s, nil
	}
	if len(vals) < 8 {
		return snapshot{}, fmt.Errorf("short snapshot reply (%d values)", len(vals))
	}
	var n [5]int64 // now, cursor, remaining, live, rate
	for i := range n {
		if n[i], err = vals[i+1].AsInt64(); err != nil {
			return snapshot{}, err
		}
	}
	s.now, s.cursor, s.remaining, s.live, s.rate = n[0], n[1], n[2], n[3], n[4]
	if m, _ := vals[6].ToString(); m != "" {
		s.measured, _ = strconv.ParseFloat(m, 64)
	}
	ms, err := vals[7].AsInt64()
	if err != nil {
		return snapshot{}, err
	}
	s.abandon = time.Duration(ms) * time.Millisecond
	if len(vals) > 8 {
		s.message, _ = vals[8].ToString()
	}
	return s, nil
}

// checkIns is the outcome of checking users in: the Redis TIME written and
// each user's place (0: no longer waiting).
type checkIns struct {
	now    int64
	places map[string]int64
}

// round is one re-read of a room by its Watcher, a pipelined call or two:
// the snapshot (unless only statuses are asked for), the check-ins of
// the users seen since theirs were last written, and the standings of the
// watched users the snapshot cannot answer (their places not known).
type round struct {
	snapshot bool
	checkIns []string
	statuses []string
}

// roundResult is what a round read. err is the first error, logged by the
// loop; the parts that were read are there all the same.
type roundResult struct {
	snap      *snapshot // nil if not asked for or not read
	checked   checkIns
	standings map[string]Standing
	err       error
}

// readRound runs rd against promotion id's room.
func (r *Rooms) readRound(ctx context.Context, id string, rd round) roundResult {
	var out roundResult
	note := func(err error) {
		if out.err == nil && err != nil {
			out.err = err
		}
	}
	if rd.snapshot {
		s, err := r.readSnapshot(ctx, id)
		note(err)
		if err == nil {
			out.snap = &s
		}
	}
	if len(rd.checkIns) > 0 {
		out.checked, _ = r.checkIn(ctx, id, rd.checkIns, note)
	}
	if len(rd.statuses) > 0 {
		var err error
		out.standings, _, err = r.statuses(ctx, id, rd.statuses)
		note(err)
	}
	return out
}

// checkIn checks users in, checkInBatch a call, the calls pipelined. The
// places of the users whose call failed are left out; note gets its error.
func (r *Rooms) checkIn(ctx context.Context, id string, users []string, note func(error)) (checkIns, error) {
	k := r.Keys(id)
	keys := []string{k.Meta(), k.Place(), k.Seen(), k.User()}
	execs := make([]rueidis.LuaExec, 0, (len(users)+checkInBatch-1)/checkInBatch)
	for from := 0; from < len(users); from += checkInBatch {
		execs = append(execs, rueidis.LuaExec{Keys: keys, Args: users[from:min(from+checkInBatch, len(users))]})
	}
	out := checkIns{places: make(map[string]int64, len(users))}
	var first error
	for i, res := range checkInScript.ExecMulti(ctx, r.client, execs...) {
		batch := execs[i].Args
		vals, err := res.ToArray()
		if err == nil && len(vals) != len(batch)+1 {
			err = fmt.Errorf("check-in reply of %d values for %d users", len(vals), len(batch))
		}
		var now int64
		if err == nil {
			now, err = vals[0].AsInt64()
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("check in %d users of %s: %w", len(batch), id, err)
				note(first)
			}
			continue
		}
		if out.now == 0 || now < out.now {
			out.now = now // the earliest check-in written
		}
		for j, u := range batch {
			p, _ := vals[j+1].AsInt64()
			out.places[u] = p
		}
	}
	return out, first
}
