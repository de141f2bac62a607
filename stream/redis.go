package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// CreateGroup creates the consumer group at id 0, creating the stream if it
// does not exist (MKSTREAM), so entries added before any consumer runs are
// never skipped. It is idempotent: an existing group is left as it is.
func CreateGroup(ctx context.Context, c rueidis.Client, stream, group string) error {
	err := c.Do(ctx, c.B().XgroupCreate().Key(stream).Group(group).Id("0").Mkstream().Build()).Error()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("stream: create group %s on %s: %w", group, stream, err)
	}
	return nil
}

// isNoGroup reports a read on a stream or group that does not exist.
func isNoGroup(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOGROUP")
}

// leaseScript takes or renews the lease on a consumer name. KEYS[1] is the
// lease key, ARGV[1] the process token, ARGV[2] the TTL in ms. It returns 1
// when the caller holds the lease afterwards (free, expired or already its
// own) and 0 when another process holds it.
var leaseScript = rueidis.NewLuaScript(`
local v = redis.call('GET', KEYS[1])
if v == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// releaseScript deletes a lease if the caller still holds it. KEYS[1] is the
// lease key, ARGV[1] the process token.
var releaseScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// delConsumerScript removes a consumer from a group only if it has nothing
// pending: XGROUP DELCONSUMER drops a consumer's pending entries with it, so
// the check and the removal must be one step. KEYS[1] is the stream, ARGV[1]
// the group, ARGV[2] the consumer. Returns 1 if removed, 0 if it still holds
// entries (they stay for reclaim) and -1 if the group is gone.
var delConsumerScript = rueidis.NewLuaScript(`
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if not ok then return -1 end
if #p > 0 then return 0 end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
return 1
`)

// trimScript trims entries every group has finished with: XTRIM MINID at the
// smallest of, over all groups, the oldest pending id and the last delivered
// id. Entries from there on (pending, undelivered, and the last delivered one)
// stay, so a reclaim never meets a trimmed pending entry. It trims with ~ and
// LIMIT ARGV[1]: Redis then removes only whole stream nodes whose every entry
// lies below that id, never more than ARGV[1] entries, so one call holds
// Redis for a bounded time (a node of a stream holds about 100 entries or
// 4 kB); callers call it again while it trims something. KEYS[1] is the
// stream. Returns the number of entries trimmed.
//
// v1 (earlier releases) trimmed exactly, with no LIMIT: one call removed
// every finished entry, however many.
var trimScript = rueidis.NewLuaScript(`-- dibs:stream_trim v2
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function less(a, b)
  local am, as = parse(a)
  local bm, bs = parse(b)
  if am ~= bm then return am < bm end
  return as < bs
end
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
if #groups == 0 then return 0 end
local low = nil
for _, g in ipairs(groups) do
  local name, pending, last
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i+1]
    elseif g[i] == 'pending' then pending = g[i+1]
    elseif g[i] == 'last-delivered-id' then last = g[i+1] end
  end
  local cand = last
  if pending > 0 then
    local s = redis.call('XPENDING', KEYS[1], name)
    if less(s[2], cand) then cand = s[2] end
  end
  if low == nil or less(cand, low) then low = cand end
end
if low == '0-0' then return 0 end
return redis.call('XTRIM', KEYS[1], 'MINID', '~', low, 'LIMIT', ARGV[1])
`)

// reclaimScript is one slice of a reclaim scan. It looks at up to ARGV[5]
// pending entries of group ARGV[1], from ARGV[4] ("-", or "(id" to start
// after id) up to the newest id that can be idle: an entry's id is the
// Redis time it was added (XADD *), at or before every delivery of it, so
// an entry idle for at least ARGV[3] ms has an id no newer than Redis TIME
// less ARGV[3] ms. It takes over, for consumer ARGV[2], the ones idle for
// at least ARGV[3] ms (XCLAIM, which counts a delivery), up to ARGV[6] of
// them: it stops looking at the one that makes ARGV[6] (XCLAIM costs Redis
// a walk through the entry's stream node per entry, a few microseconds
// each). Entries deleted from the stream while pending cannot be taken:
// XCLAIM drops them from the pending list, and the script acknowledges
// them to be sure (older servers kept them). KEYS[1] is the stream.
//
// Returns {scanned, last, entries, deliveries, deleted}: how many pending
// entries it looked at, the id of the last of them ("" if none), the entries
// taken over (as XCLAIM returns them), their delivery counts after the
// takeover (in the same order), and the ids of the deleted ones.
var reclaimScript = rueidis.NewLuaScript(`-- dibs:stream_reclaim v1
local t = redis.call('TIME')
local idle = tonumber(ARGV[3])
local upto = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - idle
if upto < 0 then return {0, '', {}, {}, {}} end
local rows = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[4], string.format('%.0f', upto), tonumber(ARGV[5]))
local take = tonumber(ARGV[6])
local ids, dlv, scanned, last = {}, {}, 0, ''
for _, r in ipairs(rows) do
  scanned = scanned + 1
  last = r[1]
  if r[3] >= idle then
    ids[#ids + 1] = r[1]
    dlv[r[1]] = r[4]
    if #ids >= take then break end
  end
end
local got, counts, gone = {}, {}, {}
if #ids > 0 then
  got = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], unpack(ids))
  local seen = {}
  for i, e in ipairs(got) do
    seen[e[1]] = true
    counts[i] = dlv[e[1]] + 1
  end
  for _, id in ipairs(ids) do
    if not seen[id] then gone[#gone + 1] = id end
  end
  if #gone > 0 then redis.call('XACK', KEYS[1], ARGV[1], unpack(gone)) end
end
return {scanned, last, got, counts, gone}
`)

// groupInfo is what XINFO GROUPS says about one group.
type groupInfo struct {
	pending  int64
	lag      int64 // -1 when Redis cannot tell
	consumer int64
}

// readGroup reads XINFO GROUPS and returns the entry for group.
func readGroup(ctx context.Context, c rueidis.Client, stream, group string) (groupInfo, error) {
	res, err := c.Do(ctx, c.B().XinfoGroups().Key(stream).Build()).ToArray()
	if err != nil {
		return groupInfo{}, fmt.Errorf("stream: XINFO GROUPS %s: %w", stream, err)
	}
	for _, g := range res {
		m, err := g.AsMap()
		if err != nil {
			return groupInfo{}, fmt.Errorf("stream: XINFO GROUPS %s: %w", stream, err)
		}
		nm := m["name"]
		name, _ := nm.ToString()
		if name != group {
			continue
		}
		gi := groupInfo{lag: -1}
		pm, cm := m["pending"], m["consumers"]
		gi.pending, _ = pm.AsInt64()
		gi.consumer, _ = cm.AsInt64()
		if lag, ok := m["lag"]; ok && !lag.IsNil() {
			if v, err := lag.AsInt64(); err == nil {
				gi.lag = v
			}
		}
		return gi, nil
	}
	return groupInfo{}, fmt.Errorf("stream: XINFO GROUPS %s: group %s not found", stream, group)
}

// toMessages converts entries read from Redis; deliveries is the count for
// entries read as new.
func toMessages(entries []rueidis.XRangeEntry, deliveries int64) []Message {
	msgs := make([]Message, len(entries))
	for i, e := range entries {
		msgs[i] = Message{ID: e.ID, Fields: e.FieldValues, Deliveries: deliveries}
	}
	return msgs
}

// deliveryCounts fills in Deliveries from XPENDING, one pipelined query per
// entry, and Failures from the failures hash, in the same round trip (only
// on the own-PEL drain, after a restart).
func (p *Pool) deliveryCounts(ctx context.Context, msgs []Message) error {
	c := p.client
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	parts := chunks(ids, callSlice)
	cmds := make(rueidis.Commands, len(msgs), len(msgs)+len(parts))
	for i, m := range msgs {
		cmds[i] = c.B().Xpending().Key(p.spec.Stream).Group(p.spec.Group).Start(m.ID).End(m.ID).Count(1).Build()
	}
	for _, part := range parts {
		cmds = append(cmds, c.B().Hmget().Key(p.failuresKey).Field(part...).Build())
	}
	res := c.DoMulti(ctx, cmds...)
	counts, err := parseChunkedCounts(res[len(msgs):], parts)
	if err != nil {
		return fmt.Errorf("stream: HMGET %s: %w", p.failuresKey, err)
	}
	for i, r := range res[:len(msgs)] {
		msgs[i].Failures = counts[i]
		rows, err := r.ToArray()
		if err != nil {
			return fmt.Errorf("stream: XPENDING %s: %w", p.spec.Stream, err)
		}
		if len(rows) == 0 {
			// No longer pending (acknowledged meanwhile): handling it again is
			// harmless for an idempotent handler.
			msgs[i].Deliveries = 1
			continue
		}
		row, err := rows[0].ToArray()
		if err != nil || len(row) < 4 {
			return fmt.Errorf("stream: XPENDING %s: unexpected reply", p.spec.Stream)
		}
		n, err := row[3].AsInt64()
		if err != nil {
			return fmt.Errorf("stream: XPENDING %s: %w", p.spec.Stream, err)
		}
		msgs[i].Deliveries = n
	}
	return nil
}

// failureCounts reads the counted failures of ids from the failures hash:
// one HMGET per callSlice ids, pipelined.
func (p *Pool) failureCounts(ctx context.Context, ids []string) ([]int64, error) {
	c := p.client
	parts := chunks(ids, callSlice)
	cmds := make(rueidis.Commands, len(parts))
	for i, part := range parts {
		cmds[i] = c.B().Hmget().Key(p.failuresKey).Field(part...).Build()
	}
	if len(cmds) == 0 {
		return nil, nil
	}
	counts, err := parseChunkedCounts(c.DoMulti(ctx, cmds...), parts)
	if err != nil {
		return nil, fmt.Errorf("stream: HMGET %s: %w", p.failuresKey, err)
	}
	return counts, nil
}

// parseChunkedCounts reads the replies of one HMGET per part, in order, as
// one list of counts.
func parseChunkedCounts(res []rueidis.RedisResult, parts [][]string) ([]int64, error) {
	var counts []int64
	for i, part := range parts {
		cs, err := parseCounts(res[i], len(part))
		if err != nil {
			return nil, err
		}
		counts = append(counts, cs...)
	}
	return counts, nil
}

// parseCounts reads an HMGET reply of n counts; a missing field is 0.
func parseCounts(r rueidis.RedisResult, n int) ([]int64, error) {
	vals, err := r.ToArray()
	if err != nil {
		return nil, err
	}
	if len(vals) != n {
		return nil, fmt.Errorf("%d values for %d fields", len(vals), n)
	}
	counts := make([]int64, n)
	for i, v := range vals {
		if v.IsNil() {
			continue
		}
		if counts[i], err = v.AsInt64(); err != nil {
			return nil, err
		}
	}
	return counts, nil
}

// countFailures adds one counted failure to each of msgs (HINCRBY, one
// pipelined round trip) and returns the new totals.
func (p *Pool) countFailures(ctx context.Context, msgs []Message) ([]int64, error) {
	c := p.client
	cmds := make(rueidis.Commands, len(msgs))
	for i, m := range msgs {
		cmds[i] = c.B().Hincrby().Key(p.failuresKey).Field(m.ID).Increment(1).Build()
	}
	counts := make([]int64, len(msgs))
	for i, r := range c.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil {
			return nil, fmt.Errorf("stream: HINCRBY %s: %w", p.failuresKey, err)
		}
		counts[i] = n
	}
	return counts, nil
}

// forgetFailures deletes the failure counts of ids (acknowledged or
// dead-lettered entries): one HDEL per callSlice ids, pipelined.
func (p *Pool) forgetFailures(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	c := p.client
	parts := chunks(ids, callSlice)
	cmds := make(rueidis.Commands, len(parts))
	for i, part := range parts {
		cmds[i] = c.B().Hdel().Key(p.failuresKey).Field(part...).Build()
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("stream: HDEL %s: %w", p.failuresKey, err)
		}
	}
	return nil
}

// sweepSample is how many fields of the failures hash one sweep checks.
const sweepSample = 100

// sweepFailures deletes failure counts whose entries are no longer pending
// in the group: entries acknowledged by someone other than the runtime (a
// dead-letter callback, an operator), entries trimmed or deleted, or counts
// written just after another process acknowledged the entry. It checks up to
// sweepSample fields picked at random (all of them when the hash holds no
// more), so every stale count goes within a few passes. An entry that is no
// longer pending never becomes pending again, so deleting its count cannot
// race with a later failure of the same entry. It returns the number of
// counts deleted.
func (p *Pool) sweepFailures(ctx context.Context) (int, error) {
	c := p.client
	ids, err := c.Do(ctx, c.B().Hrandfield().Key(p.failuresKey).Count(sweepSample).Build()).AsStrSlice()
	if err != nil {
		return 0, fmt.Errorf("stream: HRANDFIELD %s: %w", p.failuresKey, err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	cmds := make(rueidis.Commands, len(ids))
	for i, id := range ids {
		cmds[i] = c.B().Xpending().Key(p.spec.Stream).Group(p.spec.Group).Start(id).End(id).Count(1).Build()
	}
	var stale []string
	for i, r := range c.DoMulti(ctx, cmds...) {
		rows, err := r.ToArray()
		if err != nil {
			return 0, fmt.Errorf("stream: XPENDING %s: %w", p.spec.Stream, err)
		}
		if len(rows) == 0 {
			stale = append(stale, ids[i])
		}
	}
	if err := p.forgetFailures(ctx, stale); err != nil {
		return 0, err
	}
	return len(stale), nil
}

// reclaimed is what one reclaim slice found.
type reclaimed struct {
	scanned int       // pending entries looked at
	last    string    // id of the last of them; "" if none
	msgs    []Message // entries taken over, with their delivery counts
	deleted []string  // ids dropped from the pending list: their entries were deleted
}

// reclaimSlice runs reclaimScript for consumer from cursor, looking at up to
// count pending entries and taking over up to take of them.
func (p *Pool) reclaimSlice(ctx context.Context, consumer, cursor string, count, take int) (reclaimed, error) {
	fail := func(err error) (reclaimed, error) {
		return reclaimed{}, fmt.Errorf("stream: reclaim %s: %w", p.spec.Stream, err)
	}
	res, err := reclaimScript.Exec(ctx, p.client, []string{p.spec.Stream}, []string{p.spec.Group, consumer,
		strconv.FormatInt(p.cfg.ReclaimMinIdle.Milliseconds(), 10), cursor, strconv.Itoa(count), strconv.Itoa(take)}).ToArray()
	if err != nil {
		return fail(err)
	}
	if len(res) != 5 {
		return fail(fmt.Errorf("unexpected reply of %d elements", len(res)))
	}
	var s reclaimed
	scanned, err1 := res[0].AsInt64()
	last, err2 := res[1].ToString()
	entries, err3 := res[2].AsXRange()
	counts, err4 := res[3].AsIntSlice()
	deleted, err5 := res[4].AsStrSlice()
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return fail(err)
	}
	if len(counts) != len(entries) {
		return fail(fmt.Errorf("%d delivery counts for %d entries", len(counts), len(entries)))
	}
	s.scanned, s.last, s.deleted = int(scanned), last, deleted
	s.msgs = make([]Message, len(entries))
	for i, e := range entries {
		s.msgs[i] = Message{ID: e.ID, Fields: e.FieldValues, Deliveries: counts[i]}
	}
	return s, nil
}

// touch resets the idle time of entries this consumer still works on, so the
// reclaim pass of another process leaves them alone while the pool backs off.
// XCLAIM JUSTID does not count a delivery. One XCLAIM per callSlice ids,
// pipelined.
func (p *Pool) touch(ctx context.Context, consumer string, msgs []Message) error {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	c := p.client
	parts := chunks(ids, callSlice)
	cmds := make(rueidis.Commands, len(parts))
	for i, part := range parts {
		cmds[i] = c.B().Xclaim().Key(p.spec.Stream).Group(p.spec.Group).Consumer(consumer).
			MinIdleTime("0").Id(part...).Justid().Build()
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("stream: XCLAIM %s: %w", p.spec.Stream, err)
		}
	}
	return nil
}

// unixMS formats t as unix milliseconds.
func unixMS(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
