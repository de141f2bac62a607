package waitroom

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/redis/rueidis"
)

// Levers are the settings of a running room an operator changes (see
// Rooms.Apply); nil fields are kept.
type Levers struct {
	// AdmitPerSecond is the new admission rate, 1..MaxAdmitPerSecond.
	AdmitPerSecond *int64
	// MaxActive is the new cap on live passes, 0..MaxActiveCap, 0 for
	// none (see Settings.MaxActive).
	MaxActive *int64
	// Message is the new message to the line ("" clears it; see
	// CheckMessage).
	Message *string
	// PowDifficulty is the new proof-of-work difficulty,
	// 0..MaxPowDifficulty, 0 for none.
	PowDifficulty *int
}

func (l Levers) validate() error {
	switch {
	case l.AdmitPerSecond != nil && (*l.AdmitPerSecond < 1 || *l.AdmitPerSecond > MaxAdmitPerSecond):
		return fmt.Errorf("waitroom: AdmitPerSecond must be 1..%d, got %d", MaxAdmitPerSecond, *l.AdmitPerSecond)
	case l.MaxActive != nil && (*l.MaxActive < 0 || *l.MaxActive > MaxActiveCap):
		return fmt.Errorf("waitroom: MaxActive must be 0..%d, got %d", MaxActiveCap, *l.MaxActive)
	case l.PowDifficulty != nil && (*l.PowDifficulty < 0 || *l.PowDifficulty > MaxPowDifficulty):
		return fmt.Errorf("waitroom: PowDifficulty must be 0..%d, got %d", MaxPowDifficulty, *l.PowDifficulty)
	case l.Message != nil:
		return CheckMessage(*l.Message)
	}
	return nil
}

// Errors of CheckMessage.
var (
	// ErrMessageTooLong means a message has more than MaxMessageLen
	// characters.
	ErrMessageTooLong = fmt.Errorf("waitroom: a message to the line is at most %d characters", MaxMessageLen)
	// ErrMessageNotPlain means a message is not valid UTF-8 or holds a
	// control character (a line break included): it is one line of plain
	// text, shown as it is.
	ErrMessageNotPlain = errors.New("waitroom: a message to the line is one line of plain text: valid UTF-8, no control characters")
)

// CheckMessage checks a message to the line: at most MaxMessageLen
// characters of valid UTF-8 without control characters. "" is valid (no
// message).
func CheckMessage(s string) error {
	if !utf8.ValidString(s) {
		return ErrMessageNotPlain
	}
	if utf8.RuneCountInString(s) > MaxMessageLen {
		return ErrMessageTooLong
	}
	for _, c := range s {
		if unicode.IsControl(c) || c == '\u2028' || c == '\u2029' {
			return ErrMessageNotPlain
		}
	}
	return nil
}

// leversScript changes the levers of a running room, against Redis TIME.
//
// KEYS: Meta. ARGV: the new rate, max_active, message and pow, each
// preceded by a flag: "1" to set it, "0" to keep it (ARGV[1..8] in pairs).
// max_active 0, message "" and pow 0 delete their field (none).
//
// A new rate re-bases the allowance (see tickScript) in the same step, so
// that admission stays exact across the change: what the old rate allowed
// until the change, plus what the new one allows from it. With at the
// moment of the change (now, or held_ms while the room is paused: the
// pause does not count, and the resume moves open_ms on by it as usual),
//
//	open_ms' = at − ⌊old × (at − open_ms) / new⌋
//
// keeps rate × (at − open_ms), and so the allowance rate × (at − open_ms)
// − 1000 × admitted, the same to less than new / 1000 of a user (rounded
// down: never above). Before the opening (at ≤ open_ms) nothing accrued
// and open_ms stays. A tick after the change caps the allowance kept at the
// new rate's cap, as any tick does.
//
// Returns {'ok', rate, open_ms, now} as they are after the change, or
// {'not_found'} if the room does not exist.
//
// Version 2 keeps a LayoutCompact room's rate in rate2 (see Layout), and
// first takes a rate the previous release's version 1
// (testdata/levers_v1.lua) wrote there as rate2, as the tick does; in a
// LayoutClassic room it is version 1.
var leversScript = rueidis.NewLuaScript(`-- dibs:wr_levers v2
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local m = redis.call('HMGET', KEYS[1], 'rate', 'open_ms', 'held_ms', 'layout', 'rate2')
local field = 'rate'
if m[4] == '2' then
  field = 'rate2'
  if m[1] then
    redis.call('HSET', KEYS[1], 'rate2', m[1])
    redis.call('HDEL', KEYS[1], 'rate')
  else
    m[1] = m[5]
  end
end
local rate, open = tonumber(m[1]), tonumber(m[2])
if ARGV[1] == '1' then
  local new = tonumber(ARGV[2])
  if new ~= rate then
    local at = now
    local held = tonumber(m[3] or '0')
    if held > 0 and held < at then at = held end
    if at > open then
      open = at - math.floor(rate * (at - open) / new)
      redis.call('HSET', KEYS[1], 'open_ms', open)
    end
    rate = new
    redis.call('HSET', KEYS[1], field, rate)
  end
end
local function set(flag, field, value, none)
  if flag ~= '1' then return end
  if value == none then
    redis.call('HDEL', KEYS[1], field)
  else
    redis.call('HSET', KEYS[1], field, value)
  end
end
set(ARGV[3], 'max_active', ARGV[4], '0')
set(ARGV[5], 'msg', ARGV[6], '')
set(ARGV[7], 'pow', ARGV[8], '0')
return {'ok', rate, open, now}
`)

// Apply changes the levers of promotion id's running room (l's non-nil
// fields), in one step against Redis TIME: a new rate re-bases the
// allowance so that admission stays exact across the change (see
// leversScript); the cap on live passes binds from the next tick; the
// message and the difficulty from the next join or status. It then hints
// the room's watchers (Keys.Events), so the event streams carry the new
// message at once. ErrNotFound if the room does not exist.
func (r *Rooms) Apply(ctx context.Context, id string, l Levers) error {
	if err := l.validate(); err != nil {
		return err
	}
	args := make([]string, 0, 8)
	flag := func(set bool, v string) {
		if set {
			args = append(args, "1", v)
		} else {
			args = append(args, "0", "")
		}
	}
	flag(l.AdmitPerSecond != nil, optInt(l.AdmitPerSecond))
	flag(l.MaxActive != nil, optInt(l.MaxActive))
	msg := ""
	if l.Message != nil {
		msg = *l.Message
	}
	flag(l.Message != nil, msg)
	pow := ""
	if l.PowDifficulty != nil {
		pow = strconv.Itoa(*l.PowDifficulty)
	}
	flag(l.PowDifficulty != nil, pow)
	k := r.Keys(id)
	vals, err := leversScript.Exec(ctx, r.client, []string{k.Meta()}, args).ToArray()
	if err != nil {
		return fmt.Errorf("change the levers of waiting room %s: %w", id, err)
	}
	if len(vals) == 0 {
		return fmt.Errorf("change the levers of waiting room %s: empty script reply", id)
	}
	if s, _ := vals[0].ToString(); s == "not_found" {
		return ErrNotFound
	}
	if err := r.client.Do(ctx, r.client.B().Spublish().Channel(k.Events()).Message("levers").Build()).Error(); err != nil {
		r.cfg.Logger.Warn("waiting room hint after a change of its levers", "promotion", id, "err", err)
	}
	return nil
}

func optInt(p *int64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatInt(*p, 10)
}
