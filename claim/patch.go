package claim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrBelowAccepted means a change would set the stock below the claims
// accepted already (Redis's rank counter less the units given back): it
// was refused, and nothing was changed.
var ErrBelowAccepted = errors.New("claim: stock below the claims accepted")

// ErrPatchBusy means another change of the promotion holds it (see
// Gate.BeginPatch) and its lease has not expired: retry shortly.
var ErrPatchBusy = errors.New("claim: another change of the promotion is in progress")

// patchScript changes a running promotion's meta hash in one step: the
// stock (guarded: never below the claims accepted, checked against the live
// rank counter), the end, and the admin's pause (Change.Paused, stored in
// the meta field held: see keyspace.FieldPaused). The claim scripts read all
// three from the meta hash on every claim, so every instance's next claim
// sees the change.
//
// KEYS: meta, seq.
// ARGV: step (begin, apply or repair), lease token, lease ms, stock ("" to
// keep), ends_ms ("" to keep), paused ("1", "0" or "" to keep), reopen ("1"
// if a later end may reopen a promotion its end closed), and for repair
// the change count (patch_seq) the caller read with the values it repairs.
//
// A change is two steps around the database write (see Gate.BeginPatch):
// begin takes the promotion's patch lease (patch_token, patch_until; taken
// by another live token: {"busy", accepted}) and applies a lowered stock at
// once, so no claim takes a unit above it from then on; apply applies every
// given field, gives the lease up and counts the change (patch_seq; a
// lease now another's: {"busy", accepted}, nothing changed). repair is the
// re-check's apply of the database's values, skipped ({"busy", accepted})
// while a live lease is held or if a change was applied since the caller
// read patch_seq (its values may be older than that change). An end moved later reopens a promotion closed by its end (closed =
// 1 without closed_admin) when reopen is "1" and the new end is after Redis
// TIME; a promotion an admin closed stays closed.
//
// Returns {"ok", accepted}, {"below", accepted} (a stock below accepted:
// nothing changed), {"busy", accepted} or {"not_found"}.
var patchScript = newScript(`-- dibs:patch v1
local m = redis.call('HMGET', KEYS[1], 'stock', 'voided', 'closed', 'closed_admin', 'patch_token', 'patch_until', 'patch_seq')
if not m[1] then return {'not_found'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local seq = tonumber(redis.call('GET', KEYS[2]) or '0')
local accepted = seq - tonumber(m[2] or '0')
local step = ARGV[1]
local leased = m[5] and tonumber(m[6] or '0') > now
if step == 'repair' and (leased or tonumber(m[7] or '0') ~= tonumber(ARGV[8])) then return {'busy', accepted} end
if step == 'begin' and leased and m[5] ~= ARGV[2] then return {'busy', accepted} end
if step == 'apply' and m[5] ~= ARGV[2] then return {'busy', accepted} end
if ARGV[4] ~= '' then
  local stock = tonumber(ARGV[4])
  if step ~= 'begin' or stock < tonumber(m[1]) then
    if stock < accepted then return {'below', accepted} end
    redis.call('HSET', KEYS[1], 'stock', ARGV[4])
  end
end
if step == 'begin' then
  redis.call('HSET', KEYS[1], 'patch_token', ARGV[2], 'patch_until', now + tonumber(ARGV[3]))
  return {'ok', accepted}
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[1], 'ends_ms', ARGV[5])
  if m[3] == '1' and m[4] ~= '1' and ARGV[7] == '1' and now < tonumber(ARGV[5]) then
    redis.call('HSET', KEYS[1], 'closed', 0)
  end
end
if ARGV[6] == '1' then
  redis.call('HSET', KEYS[1], 'held', 1)
elseif ARGV[6] == '0' then
  redis.call('HDEL', KEYS[1], 'held')
end
if step == 'apply' then
  redis.call('HDEL', KEYS[1], 'patch_token', 'patch_until')
  redis.call('HINCRBY', KEYS[1], 'patch_seq', 1)
end
return {'ok', accepted}
`)

// DefaultPatchLease is how long a change of a promotion holds it between
// BeginPatch and Patch.Apply: past it, a change that died in between is
// repaired from the database by the re-check.
const DefaultPatchLease = 30 * time.Second

// Change is what a change of a running promotion sets in Redis; nil fields
// are kept.
type Change struct {
	Stock  *int64
	EndsAt *time.Time
	// Paused pauses (true) or resumes (false) the promotion's claims: a
	// paused promotion answers ErrPaused.
	Paused *bool
	// Reopen lets an end moved later reopen a promotion its end closed
	// (never one an admin closed): the caller sets it when the database
	// shows the promotion neither closed nor drained.
	Reopen bool
}

// Patch is one change of a promotion in progress: taken by BeginPatch,
// finished by Apply.
type Patch struct {
	g     *Gate
	id    string
	token string
	ch    Change
}

// BeginPatch takes promotion id's change lease for lease (DefaultPatchLease
// if 0) and applies a lowered stock at once, guarded: ErrBelowAccepted if
// it is below the claims accepted (nothing changed). ErrPatchBusy while
// another change holds the promotion; ErrNotFound without its meta hash.
// The caller writes the database next, then calls Apply: so Redis's stock
// is never above the database's for longer than the change takes, and a
// lowered stock reaches the database only once Redis enforces it.
func (g *Gate) BeginPatch(ctx context.Context, id string, ch Change, lease time.Duration) (*Patch, int64, error) {
	if lease <= 0 {
		lease = DefaultPatchLease
	}
	p := &Patch{g: g, id: id, token: randomToken(), ch: ch}
	accepted, err := g.patch(ctx, id, "begin", p.token, lease, Change{Stock: ch.Stock})
	if err != nil {
		return nil, accepted, err
	}
	return p, accepted, nil
}

// Apply applies the change and gives the lease up. It returns the claims
// accepted when it ran; ErrBelowAccepted if a raised stock was still below
// them (nothing changed), ErrPatchBusy if the lease expired and another
// change took the promotion.
func (p *Patch) Apply(ctx context.Context) (int64, error) {
	return p.g.patch(ctx, p.id, "apply", p.token, 0, p.ch)
}

// Undo gives the lease up, setting the stock back to stock (the
// database's, which the change did not reach) if the change had lowered it.
func (p *Patch) Undo(ctx context.Context, stock int64) error {
	_, err := p.g.patch(ctx, p.id, "apply", p.token, 0, Change{Stock: &stock})
	return err
}

// Repair applies ch (the database's values, read after seq: Mark.Changes)
// unless a change holds the promotion or was applied since seq was read:
// then it returns ErrPatchBusy and does nothing.
func (g *Gate) Repair(ctx context.Context, id string, seq int64, ch Change) (int64, error) {
	return g.patchSeq(ctx, id, "repair", "", 0, ch, seq)
}

func (g *Gate) patch(ctx context.Context, id, step, token string, lease time.Duration, ch Change) (int64, error) {
	return g.patchSeq(ctx, id, step, token, lease, ch, 0)
}

func (g *Gate) patchSeq(ctx context.Context, id, step, token string, lease time.Duration, ch Change, seq int64) (int64, error) {
	k := g.Keys(id)
	args := []string{step, token, strconv.FormatInt(lease.Milliseconds(), 10), "", "", "", flag(ch.Reopen),
		strconv.FormatInt(seq, 10)}
	if ch.Stock != nil {
		args[3] = strconv.FormatInt(*ch.Stock, 10)
	}
	if ch.EndsAt != nil {
		args[4] = strconv.FormatInt(ch.EndsAt.UnixMilli(), 10)
	}
	if ch.Paused != nil {
		args[5] = flag(*ch.Paused)
	}
	vals, err := patchScript.Exec(ctx, g.client, []string{k.Meta(), k.Seq()}, args).ToArray()
	if err == nil && len(vals) == 0 {
		err = errors.New("empty script reply")
	}
	var status string
	if err == nil {
		status, err = vals[0].ToString()
	}
	if err != nil {
		return 0, fmt.Errorf("%s change of %s: %w", step, id, err)
	}
	if status == "not_found" {
		return 0, ErrNotFound
	}
	var accepted int64
	if len(vals) > 1 {
		accepted, _ = vals[1].AsInt64()
	}
	switch status {
	case "ok":
		return accepted, nil
	case "below":
		return accepted, ErrBelowAccepted
	case "busy":
		return accepted, ErrPatchBusy
	}
	return accepted, fmt.Errorf("%s change of %s: unexpected outcome %q", step, id, status)
}

// revokeScript marks issued claims revoked and, if asked, returns their
// units to stock, as voidScript does. KEYS: meta, status, status bytes.
// ARGV: "1" to return the units, then ranks. A rank already revoked or voided is left
// alone, so applying one revoke twice returns its unit once. Returns
// {revoked, ranks...}: the number marked revoked now, then the ranks Redis
// holds no status for (it lost them, and a rebuild has not restored them
// yet), for which nothing happened.
var revokeScript = newScript(`-- dibs:revoke v2` + layoutLua + `
st_mode(redis.call('HGET', KEYS[1], 'mode'), KEYS[2], KEYS[3])
local n = 0
local unknown = {}
for i = 2, #ARGV do
  local s = st_get(ARGV[i])
  if not s then
    unknown[#unknown + 1] = ARGV[i]
  elseif s ~= 'r' and s ~= 'v' then
    st_set(ARGV[i], 'r')
    n = n + 1
  end
end
if n > 0 and ARGV[1] == '1' then redis.call('HINCRBY', KEYS[1], 'voided', n) end
return {n, unpack(unknown)}
`)

// Revoke marks issued claims of the promotion revoked (their status
// becomes StatusRevoked) and, with returnStock, gives their units back to
// stock the way Void does. A claim revoked or voided already is left alone.
// It returns how many it revoked now, and the ranks Redis holds no status
// for (lost with Redis's history, not yet rebuilt): nothing was done for
// those, and the revoke must be applied again later.
func (g *Gate) Revoke(ctx context.Context, id string, returnStock bool, ranks ...int64) (revoked int64, unknown []int64, err error) {
	if len(ranks) == 0 {
		return 0, nil, nil
	}
	k := g.Keys(id)
	args := append([]string{flag(returnStock)}, formatInts(ranks)...)
	vals, err := revokeScript.Exec(ctx, g.client, []string{k.Meta(), k.Status(), k.StatusBytes()}, args).AsIntSlice()
	if err == nil && len(vals) == 0 {
		err = errors.New("empty script reply")
	}
	if err != nil {
		return 0, nil, fmt.Errorf("revoke in %s: %w", id, err)
	}
	return vals[0], vals[1:], nil
}

// randomToken is a change's lease token.
func randomToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// flag is a boolean as the scripts take it.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
