package claim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dibsio/dibs/keyspace"
	"github.com/redis/rueidis"
)

// Rebuilding a promotion's counters after Redis lost writes.
//
// Redis is fast, the database is the truth: when Redis loses a promotion's
// keys (a flush, a restart without its append-only file, a failover to an
// empty or lagging replica), its counters are rebuilt from the rows the
// database holds, with the database as the floor. The promotion's claims
// wait first (it is rebuilding: claims and grants answer ErrRebuilding),
// then the database's claims are merged in chunks, then the rank counter is
// raised and claims are let in again. (Go says "rebuilding" for this wait
// and "paused" for an admin's pause only; the meta hash keeps its first
// field names, see keyspace.FieldRebuilding.) Every merge takes the larger of Redis's and the
// database's value, so a rebuild never lowers a counter, never frees a unit
// the database does not show as voided, and can run twice without harm.

// Sentinel errors of a rebuild.
var (
	// ErrRebuilding means the promotion's claims wait while its counters
	// are rebuilt from the database: nothing was taken; retry shortly.
	ErrRebuilding = errors.New("claim: promotion's counters are being rebuilt")
	// ErrRebuildBusy means another rebuild, whose hold has not expired,
	// holds the promotion: leave it to that one.
	ErrRebuildBusy = errors.New("claim: another rebuild holds the promotion")
	// ErrSuperseded means the rebuild lost its hold on the promotion:
	// another rebuild took over, or Redis lost the promotion again. Its
	// work so far is harmless; it must stop without resuming.
	ErrSuperseded = errors.New("claim: rebuild superseded")
	// ErrNotRebuilding means TakeOver found the promotion no longer
	// rebuilding: the rebuild it meant to finish is done.
	ErrNotRebuilding = errors.New("claim: promotion not rebuilding")
	// ErrNotPaused is ErrNotRebuilding under its first name.
	//
	// Deprecated: use ErrNotRebuilding.
	ErrNotPaused = ErrNotRebuilding
	// ErrHalted means the promotion is halted for an operator (see
	// Gate.Halt): only BeginRebuildHalted rebuilds it.
	ErrHalted = errors.New("claim: promotion halted for an operator")
)

const (
	// DefaultRebuildLease is how long a rebuild holds a promotion without
	// a sign of life before another process may take it over.
	DefaultRebuildLease = 30 * time.Second
	// RestoreChunk is how many claims one restore script call merges, so a
	// promotion of any size never blocks Redis for long.
	RestoreChunk = 1000
)

// OpenRebuilding is Open for a promotion that may have history: if the meta
// hash has to be created (Redis lost it, or never had it), it is created
// rebuilding, so no claim is accepted on counters that ignore the database
// until a rebuild resumes it. It reports whether the meta hash was created.
func (g *Gate) OpenRebuilding(ctx context.Context, p Promotion) (bool, error) {
	return g.open(ctx, p, true)
}

// OpenPaused is OpenRebuilding under its first name.
//
// Deprecated: use OpenRebuilding.
func (g *Gate) OpenPaused(ctx context.Context, p Promotion) (bool, error) {
	return g.OpenRebuilding(ctx, p)
}

// Mark is what Redis holds of a promotion's durability markers.
type Mark struct {
	Exists bool // the meta hash exists
	// Rebuilding is whether claims wait for a rebuild of the counters
	// (see Gate.BeginRebuild; a halted promotion's wait too).
	Rebuilding bool
	Seq        int64 // ranks handed out
	// Halted is why the promotion is halted for an operator (see
	// Gate.Halt), or "".
	Halted string
	// Stock is the promotion's stock (for grants: the expected target
	// count), Voided the units voided claims gave back, and Closed whether
	// it was closed or found ended by Gate.Ended.
	Stock, Voided int64
	Closed        bool
	// EndsAt is the end the meta hash holds, and Paused whether an admin
	// paused the promotion's claims (see Gate.BeginPatch): the re-check
	// compares them with the database's and repairs Redis where they differ.
	EndsAt time.Time
	Paused bool
	// Changes counts the changes applied (see Gate.BeginPatch); Repair
	// takes it.
	Changes int64
}

// SoldOut reports whether the marks leave no unit for a claim: every unit
// of stock is held by a claim that was not voided.
func (m Mark) SoldOut() bool { return m.Exists && m.Seq-m.Voided >= m.Stock }

// Marks reads the marks of the promotions, in the order given, in one
// pipelined round trip (two reads per promotion).
func (g *Gate) Marks(ctx context.Context, ids []string) ([]Mark, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	cmds := make(rueidis.Commands, 0, 2*len(ids))
	for _, id := range ids {
		k := g.Keys(id)
		cmds = append(cmds,
			g.client.B().Hmget().Key(k.Meta()).Field(keyspace.FieldStock, keyspace.FieldRebuilding, "halted", keyspace.FieldVoided,
				keyspace.FieldClosed, keyspace.FieldEndsMs, keyspace.FieldPaused, "patch_seq").Build(),
			g.client.B().Get().Key(k.Seq()).Build())
	}
	res := g.client.DoMulti(ctx, cmds...)
	out := make([]Mark, len(ids))
	for i, id := range ids {
		meta, err := res[2*i].ToArray()
		if err != nil {
			return nil, fmt.Errorf("marks of %s: %w", id, err)
		}
		if len(meta) == 8 && !meta[0].IsNil() {
			out[i].Exists = true
			out[i].Stock, _ = meta[0].AsInt64()
			r, _ := meta[1].ToString()
			out[i].Rebuilding = r == "1"
			out[i].Halted, _ = meta[2].ToString()
			out[i].Voided, _ = meta[3].AsInt64()
			c, _ := meta[4].ToString()
			out[i].Closed = c == "1"
			if ms, err := meta[5].AsInt64(); err == nil {
				out[i].EndsAt = time.UnixMilli(ms).UTC()
			}
			p, _ := meta[6].ToString()
			out[i].Paused = p == "1"
			if !meta[7].IsNil() {
				out[i].Changes, _ = meta[7].AsInt64()
			}
		}
		seq, err := res[2*i+1].AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			return nil, fmt.Errorf("marks of %s: %w", id, err)
		}
		out[i].Seq = seq
	}
	return out, nil
}

// Confirmed returns, for each of the promotions in the order given, the
// highest rank Redis saw confirmed into the database (acknowledged by Ack
// after the database committed it; 0 if none or unknown), in one pipelined
// round trip. A database whose highest rank is below it lost rows it held:
// it was restored from an older backup, or failed over to a lagging replica.
// Read it before the database, so a rank confirmed in between cannot look
// missing.
func (g *Gate) Confirmed(ctx context.Context, ids []string) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	cmds := make(rueidis.Commands, len(ids))
	for i, id := range ids {
		cmds[i] = g.client.B().Hget().Key(g.Keys(id).Meta()).Field("confirmed").Build()
	}
	out := make([]int64, len(ids))
	for i, res := range g.client.DoMulti(ctx, cmds...) {
		n, err := res.AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			return nil, fmt.Errorf("confirmed rank of %s: %w", ids[i], err)
		}
		out[i] = n
	}
	return out, nil
}

// Halt halts the promotion for an operator, recording reason: claims and
// grants answer ErrRebuilding, and no automatic rebuild resumes it
// (BeginRebuild and TakeOver return ErrHalted) until an operator's rebuild
// (BeginRebuildHalted) does. It reports whether this call halted it (false if it
// was halted already) and returns ErrNotFound if Redis does not hold the
// promotion.
func (g *Gate) Halt(ctx context.Context, id, reason string) (bool, error) {
	n, err := haltScript.Exec(ctx, g.client, []string{g.Keys(id).Meta()}, []string{reason}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("halt %s: %w", id, err)
	}
	if n < 0 {
		return false, fmt.Errorf("halt %s: %w", id, ErrNotFound)
	}
	return n == 1, nil
}

// Rebuild is one rebuild's hold on a rebuilding promotion: taken by
// BeginRebuild, renewed by every Restore, ended by Resume or Release. It is not safe for
// concurrent use.
type Rebuild struct {
	g       *Gate
	id      string
	token   string
	lease   time.Duration
	created bool
	done    int64 // restore chunks applied; the meta hash's rebuild_done must agree
}

// BeginRebuild opens the promotion (creating its meta hash rebuilding if
// absent, see OpenRebuilding; p is the full definition Open takes, whose end
// and closed flag are refreshed), marks it rebuilding — from now on claims
// and grants answer ErrRebuilding — and takes the rebuild hold for lease (DefaultRebuildLease
// if 0). owner names the caller in the hold, for diagnosis. It returns
// ErrRebuildBusy if another rebuild holds the promotion and its hold has not
// expired; a hold that expired (its owner died) is taken over. A promotion
// halted for an operator (see Gate.Halt) is left alone: ErrHalted.
//
// Leave p.SeqFloor 0 and raise the rank counter with Resume once the claims
// are restored: a counter raised before the rebuild is done no longer shows
// that Redis lost writes, should the rebuild fail.
func (g *Gate) BeginRebuild(ctx context.Context, p Promotion, owner string, lease time.Duration) (*Rebuild, error) {
	return g.beginRebuild(ctx, p, owner, lease, false, false)
}

// Pause is BeginRebuild under its first name.
//
// Deprecated: use BeginRebuild.
func (g *Gate) Pause(ctx context.Context, p Promotion, owner string, lease time.Duration) (*Rebuild, error) {
	return g.BeginRebuild(ctx, p, owner, lease)
}

// BeginRebuildHalted is BeginRebuild for an operator: it also takes a promotion halted by
// Gate.Halt, lifting the halt, so the rebuild that follows resumes it. The
// operator decides that the database is what claims go on from: the
// confirmed rank that caused the halt is forgotten, and the next
// acknowledgements set it anew.
func (g *Gate) BeginRebuildHalted(ctx context.Context, p Promotion, owner string, lease time.Duration) (*Rebuild, error) {
	return g.beginRebuild(ctx, p, owner, lease, false, true)
}

// PauseHalted is BeginRebuildHalted under its first name.
//
// Deprecated: use BeginRebuildHalted.
func (g *Gate) PauseHalted(ctx context.Context, p Promotion, owner string, lease time.Duration) (*Rebuild, error) {
	return g.BeginRebuildHalted(ctx, p, owner, lease)
}

// TakeOver is BeginRebuild for a promotion found rebuilding with no rebuild
// running: it takes the hold only if the promotion is still rebuilding when
// the script runs, and returns ErrNotRebuilding otherwise, so a stale
// observation never holds the claims of a promotion that was just resumed.
func (g *Gate) TakeOver(ctx context.Context, p Promotion, owner string, lease time.Duration) (*Rebuild, error) {
	return g.beginRebuild(ctx, p, owner, lease, true, false)
}

func (g *Gate) beginRebuild(ctx context.Context, p Promotion, owner string, lease time.Duration, takeover, lift bool) (*Rebuild, error) {
	if lease <= 0 {
		lease = DefaultRebuildLease
	}
	created, err := g.OpenRebuilding(ctx, p)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	r := &Rebuild{g: g, id: p.ID, token: owner + "/" + hex.EncodeToString(b), lease: lease, created: created}
	only := "0"
	if takeover {
		only = "1"
	}
	lifts := "0"
	if lift {
		lifts = "1"
	}
	out, err := pauseScript.Exec(ctx, g.client, []string{g.Keys(p.ID).Meta()},
		[]string{r.token, strconv.FormatInt(lease.Milliseconds(), 10), only, lifts}).ToString()
	if err != nil {
		return nil, fmt.Errorf("begin rebuild of %s: %w", p.ID, err)
	}
	switch out {
	case "ok":
		return r, nil
	case "ok_lost":
		// Found rebuilding by OpenRebuilding and never held: Redis had lost the
		// promotion, whoever re-created it.
		r.created = true
		return r, nil
	case "busy":
		return nil, ErrRebuildBusy
	case "not_found":
		return nil, fmt.Errorf("begin rebuild of %s: %w", p.ID, ErrSuperseded)
	case "not_paused":
		return nil, ErrNotRebuilding
	case "halted":
		return nil, fmt.Errorf("begin rebuild of %s: %w", p.ID, ErrHalted)
	}
	return nil, fmt.Errorf("begin rebuild of %s: unexpected outcome %q", p.ID, out)
}

// Created reports whether BeginRebuild had to create the promotion's meta hash:
// Redis had lost the promotion entirely.
func (r *Rebuild) Created() bool { return r.created }

// Known is a claim the database knows of, to merge into Redis.
type Known struct {
	Rank   int64
	UserID string
	Slot   int
	// Status is StatusIssued, StatusFailed or StatusVoided, or
	// StatusPending for a claim to put back into the work stream: one an
	// admin replayed, which Redis lost before it was issued.
	Status string
	// IssuedAt is when the claim was issued (StatusIssued only).
	IssuedAt time.Time
	// ClaimID and AcceptedAt make the work-stream entry of a StatusPending
	// claim, which keeps its identity.
	ClaimID    string
	AcceptedAt time.Time
}

// RestoreStats counts what Restore changed in Redis.
type RestoreStats struct {
	Users    int64 // times a user's claim count was raised
	Statuses int64 // claim statuses written
	Voided   int64 // units recorded as returned to stock
	Requeued int64 // replayed claims put back into the work stream
}

// Add adds o to s.
func (s *RestoreStats) Add(o RestoreStats) {
	s.Users += o.Users
	s.Statuses += o.Statuses
	s.Voided += o.Voided
	s.Requeued += o.Requeued
}

// Restore merges claims into the promotion's users, byuser and status
// hashes, RestoreChunk per script call, and renews the hold. Each value
// becomes the larger of Redis's and the database's: a user's count is raised
// to the claim's slot, the rank joins the user's list, a status only moves
// forward (pending → failed → issued; pending or failed → voided, counting
// the unit as returned), and a StatusPending claim is enqueued again only if
// Redis has no status for its rank at all. It returns ErrSuperseded if the
// hold was lost.
func (r *Rebuild) Restore(ctx context.Context, claims []Known) (RestoreStats, error) {
	var total RestoreStats
	k := r.g.Keys(r.id)
	keys := []string{k.Meta(), k.Users(), k.Status(), k.ByUser(), k.Stream(), k.StatusBytes()}
	lease := strconv.FormatInt(r.lease.Milliseconds(), 10)
	for start := 0; start < len(claims); start += RestoreChunk {
		chunk := claims[start:min(start+RestoreChunk, len(claims))]
		args := make([]string, 0, 3+6*len(chunk))
		args = append(args, r.token, lease, strconv.FormatInt(r.done, 10))
		for _, c := range chunk {
			code, err := restoreCode(c)
			if err != nil {
				return total, fmt.Errorf("restore %s: %w", r.id, err)
			}
			args = append(args, strconv.FormatInt(c.Rank, 10), c.UserID, strconv.Itoa(c.Slot), code,
				c.ClaimID, strconv.FormatInt(c.AcceptedAt.UnixMilli(), 10))
		}
		vals, err := restoreScript.Exec(ctx, r.g.client, keys, args).ToArray()
		if err != nil {
			return total, fmt.Errorf("restore %s: %w", r.id, err)
		}
		st, err := r.outcome(vals, 5)
		if err != nil {
			return total, fmt.Errorf("restore %s: %w", r.id, err)
		}
		r.done++
		total.Add(RestoreStats{Users: st[0], Statuses: st[1], Voided: st[2], Requeued: st[3]})
	}
	return total, nil
}

func restoreCode(c Known) (string, error) {
	if c.Rank < 1 || c.Slot < 1 || c.UserID == "" {
		return "", fmt.Errorf("claim of rank %d, user %q, slot %d cannot be restored", c.Rank, c.UserID, c.Slot)
	}
	switch c.Status {
	case StatusIssued:
		return "i:" + strconv.FormatInt(c.IssuedAt.UnixMilli(), 10), nil
	case StatusFailed:
		return "f", nil
	case StatusVoided:
		return "v", nil
	case StatusPending:
		if c.ClaimID == "" {
			return "", fmt.Errorf("pending claim of rank %d has no claim id to enqueue", c.Rank)
		}
		return "p", nil
	}
	return "", fmt.Errorf("claim of rank %d has unknown status %q", c.Rank, c.Status)
}

// Resume raises the rank counter to at least seqFloor (the database's
// highest rank, read after the last Restore), lets claims in again and ends
// the hold, in one script. It returns the rank counter, or ErrSuperseded if
// the hold was lost (then the promotion stays rebuilding for whoever holds
// it).
func (r *Rebuild) Resume(ctx context.Context, seqFloor int64) (int64, error) {
	k := r.g.Keys(r.id)
	vals, err := resumeScript.Exec(ctx, r.g.client, []string{k.Meta(), k.Seq()},
		[]string{r.token, strconv.FormatInt(seqFloor, 10), strconv.FormatInt(r.done, 10)}).ToArray()
	if err != nil {
		return 0, fmt.Errorf("resume %s: %w", r.id, err)
	}
	st, err := r.outcome(vals, 2)
	if err != nil {
		return 0, fmt.Errorf("resume %s: %w", r.id, err)
	}
	return st[0], nil
}

// Release gives the hold up without resuming, so another process may take
// the rebuild over at once instead of waiting for the hold to expire. The
// promotion stays rebuilding.
func (r *Rebuild) Release(ctx context.Context) error {
	err := releaseScript.Exec(ctx, r.g.client, []string{r.g.Keys(r.id).Meta()}, []string{r.token}).Error()
	if err != nil {
		return fmt.Errorf("release rebuild of %s: %w", r.id, err)
	}
	return nil
}

// outcome reads a {"ok", n...} reply of want elements, mapping the other
// outcomes to ErrSuperseded.
func (r *Rebuild) outcome(vals []rueidis.RedisMessage, want int) ([]int64, error) {
	if len(vals) == 0 {
		return nil, errors.New("empty script reply")
	}
	status, err := vals[0].ToString()
	if err != nil {
		return nil, err
	}
	switch status {
	case "ok":
	case "not_found", "superseded":
		return nil, fmt.Errorf("%s: %w", status, ErrSuperseded)
	default:
		return nil, fmt.Errorf("unexpected outcome %q", status)
	}
	if len(vals) != want {
		return nil, fmt.Errorf("reply of %d elements, want %d", len(vals), want)
	}
	out := make([]int64, want-1)
	for i := range out {
		if out[i], err = vals[i+1].AsInt64(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pauseScript marks a promotion rebuilding (meta field paused, see
// keyspace.FieldRebuilding) and takes the rebuild hold.
//
// KEYS: meta. ARGV: token, hold in ms, "1" to act only on a promotion that
// is rebuilding already (a take-over), "1" to lift a halt (see haltScript).
//
// Returns "ok" ("ok_lost" if the promotion was made rebuilding by
// OpenRebuilding and never held: re-created after a loss), "busy" if
// another token holds an unexpired hold, "not_paused" for a take-over of a
// promotion no longer rebuilding, "halted"
// for a halted promotion unless ARGV[4] lifts the halt (and forgets the
// confirmed rank that caused it: the database is accepted as it is), or
// "not_found" if the meta hash is gone. The hold's expiry is read against
// Redis TIME, so the processes' clocks do not matter.
var pauseScript = newScript(`-- dibs:pause v1
if redis.call('EXISTS', KEYS[1]) == 0 then return 'not_found' end
if ARGV[3] == '1' and redis.call('HGET', KEYS[1], 'paused') ~= '1' then return 'not_paused' end
if redis.call('HEXISTS', KEYS[1], 'halted') == 1 then
  if ARGV[4] ~= '1' then return 'halted' end
  redis.call('HDEL', KEYS[1], 'halted', 'confirmed')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'rebuild', 'rebuild_until', 'paused')
if h[1] and h[1] ~= ARGV[1] and tonumber(h[2] or '0') > now then return 'busy' end
redis.call('HSET', KEYS[1], 'paused', 1, 'rebuild', ARGV[1], 'rebuild_until', now + tonumber(ARGV[2]),
  'rebuild_done', 0)
if h[3] == '1' and not h[1] then return 'ok_lost' end
return 'ok'
`)

// restoreScript merges database claims into a rebuilding promotion.
//
// KEYS: meta, users, status, byuser, stream, status bytes.
// ARGV: token, hold in ms, chunks applied so far, then per claim six values:
// rank, user, slot, code (i:<ms> issued, f failed, v voided, p to enqueue
// again), claim id, at. The records written are of the layout the meta
// hash's mode names (a compact promotion keeps i for i:<ms>, and counts a
// user's claims from the user's list: a rank added to it counts as a user
// raised).
//
// Returns {"ok", users raised, statuses written, voided, requeued}, or
// {"superseded"} if the token no longer holds the promotion or the meta
// hash's count of applied chunks disagrees (Redis lost writes since the
// rebuild began: chunks already merged may be gone, so the rebuild must start over), or
// {"not_found"} if the meta hash is gone. Nothing is ever lowered: see
// Rebuild.Restore.
var restoreScript = newScript(`-- dibs:restore v2` + layoutLua + `
local h = redis.call('HMGET', KEYS[1], 'rebuild', 'stock', 'rebuild_done', 'mode')
if not h[2] then return {'not_found'} end
st_mode(h[4], KEYS[3], KEYS[6])
if h[1] ~= ARGV[1] or tonumber(h[3] or '-1') ~= tonumber(ARGV[3]) then return {'superseded'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'rebuild_until', now + tonumber(ARGV[2]))
redis.call('HINCRBY', KEYS[1], 'rebuild_done', 1)
local function add_rank(list, rank)
  if not list then return rank end
  local rs = {}
  for r in string.gmatch(list, '[^,]+') do
    if r == rank then return nil end
    rs[#rs + 1] = r
  end
  rs[#rs + 1] = rank
  table.sort(rs, function(a, b) return tonumber(a) < tonumber(b) end)
  return table.concat(rs, ',')
end
local users, statuses, voided, requeued = 0, 0, 0, 0
for i = 4, #ARGV, 6 do
  local rank, user, slot, code = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  if not st_compact then
    local count = tonumber(redis.call('HGET', KEYS[2], user) or '0')
    if count < slot then
      redis.call('HSET', KEYS[2], user, slot)
      users = users + 1
    end
  end
  local list = add_rank(redis.call('HGET', KEYS[4], user), rank)
  if list then
    redis.call('HSET', KEYS[4], user, list)
    if st_compact then users = users + 1 end
  end
  local s = st_get(rank)
  if string.sub(code, 1, 2) == 'i:' then
    if not s or s == 'p' or s == 'f' then
      st_set(rank, code)
      statuses = statuses + 1
    end
  elseif code == 'f' then
    if not s or s == 'p' then
      st_set(rank, 'f')
      statuses = statuses + 1
    end
  elseif code == 'v' then
    if not s or s == 'p' or s == 'f' then
      st_set(rank, 'v')
      statuses = statuses + 1
      voided = voided + 1
    end
  elseif code == 'p' then
    if not s then
      st_set(rank, 'p')
      redis.call('XADD', KEYS[5], '*', 'claim_id', ARGV[i + 4], 'user', user,
        'rank', rank, 'slot', slot, 'at', ARGV[i + 5])
      statuses = statuses + 1
      requeued = requeued + 1
    end
  end
end
if voided > 0 then redis.call('HINCRBY', KEYS[1], 'voided', voided) end
return {'ok', users, statuses, voided, requeued}
`)

// resumeScript ends a rebuild: raises the rank counter to the floor,
// lets the promotion's claims in again and records when (rebuilt_ms, Redis TIME; see
// collisionScript).
//
// KEYS: meta, seq. ARGV: token, seq floor, chunks applied (see restoreScript).
//
// Returns {"ok", seq}, {"superseded"} or {"not_found"} (see restoreScript).
var resumeScript = newScript(`-- dibs:resume v1
local h = redis.call('HMGET', KEYS[1], 'rebuild', 'stock', 'rebuild_done')
if not h[2] then return {'not_found'} end
if h[1] ~= ARGV[1] or tonumber(h[3] or '-1') ~= tonumber(ARGV[3]) then return {'superseded'} end
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
local floor = tonumber(ARGV[2])
if seq < floor then
  redis.call('SET', KEYS[2], ARGV[2])
  seq = floor
end
redis.call('HDEL', KEYS[1], 'paused', 'rebuild', 'rebuild_until', 'rebuild_done')
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'rebuilt_ms', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return {'ok', seq}
`)

// releaseScript gives a rebuild hold up, leaving the promotion rebuilding.
// KEYS: meta. ARGV: token. Returns 1 if the token held it.
var releaseScript = newScript(`-- dibs:release v1
if redis.call('HGET', KEYS[1], 'rebuild') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'rebuild_until', 0)
return 1
`)
