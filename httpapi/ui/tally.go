package ui

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// RejectCodes are the problem codes a claim is refused with by its
// promotion (not for a bad request, an unknown promotion or an outage):
// the demand the promotion turned away. A Tally counts them by code.
var RejectCodes = [...]string{"sold_out", "already_claimed", "not_started", "ended", "not_admitted", "paused", "claim_voided"}

// rejectIndex maps a code of RejectCodes to its place.
var rejectIndex = func() map[string]int {
	m := make(map[string]int, len(RejectCodes))
	for i, c := range RejectCodes {
		m[c] = i
	}
	return m
}()

// Tally counts, per promotion, what this instance answered and issued:
// claims accepted, claims refused by code, claims its issuers wrote; and
// it keeps the latest tick of each waiting room this instance ticks
// (Room). The request goroutines, issuers and the waiting room's scheduler
// write to it with atomics, never blocking; the Hub's loop reads it once
// a second. Only promotions that answered, issued or had their room
// ticked here have an entry, so the set is bounded by the promotions this
// instance served; the Hub forgets an entry idle for a day. The zero Tally
// is ready.
type Tally struct {
	m     sync.Map // promotion id -> *counters
	rooms sync.Map // promotion id -> *atomic.Pointer[roomTick]
}

// RoomTick is a waiting room's figures as one tick of it saw them: the
// room's own totals, whichever instance its users came through.
type RoomTick struct {
	// Admitted is the passes handed out in total.
	Admitted int64
	// Abandoned is the places admission skipped in total.
	Abandoned int64
	// Waiting is the places not yet reached by admission; nil when the
	// tick did not read it.
	Waiting *int64
}

// roomTick is a RoomTick as the Tally keeps it: with when it came, and
// the time since the one before it (0 for the first).
type roomTick struct {
	RoomTick
	at    time.Time
	every time.Duration
}

// counters are one promotion's counts since the instance started.
type counters struct {
	accepted, issued atomic.Int64
	rejected         [len(RejectCodes)]atomic.Int64 // by RejectCodes
}

// Totals are one promotion's counts in a Tally since the instance started.
type Totals struct {
	Accepted, Issued int64
	// Rejected counts the refused claims by code; codes without any are
	// left out.
	Rejected map[string]int64
}

// RejectedSum is the sum of Rejected.
func (t Totals) RejectedSum() int64 {
	var n int64
	for _, v := range t.Rejected {
		n += v
	}
	return n
}

func (t *Tally) of(id string) *counters {
	if c, ok := t.m.Load(id); ok {
		return c.(*counters)
	}
	c, _ := t.m.LoadOrStore(id, new(counters))
	return c.(*counters)
}

// Answer counts one claim request's outcome: "accepted", or a code of
// RejectCodes; any other outcome (a replay, a bad request, an unknown
// promotion, an outage) is not counted.
func (t *Tally) Answer(promotionID, outcome string) {
	if outcome == "accepted" {
		t.of(promotionID).accepted.Add(1)
		return
	}
	if i, ok := rejectIndex[outcome]; ok {
		t.of(promotionID).rejected[i].Add(1)
	}
}

// Issued counts n claims of the promotion written by this instance's
// issuers (promotion.Config.OnIssued).
func (t *Tally) Issued(promotionID string, n int) {
	t.of(promotionID).issued.Add(int64(n))
}

// Room records the latest tick of the promotion's waiting room
// (waitroom.Config.OnTick): the Hub puts its figures into the ring every
// interval while it is fresh. It keeps one value per room, replaced by
// each tick.
func (t *Tally) Room(promotionID string, rt RoomTick) { t.putRoom(promotionID, rt, time.Now()) }

func (t *Tally) putRoom(id string, rt RoomTick, at time.Time) {
	v, ok := t.rooms.Load(id)
	if !ok {
		v, _ = t.rooms.LoadOrStore(id, new(atomic.Pointer[roomTick]))
	}
	p := v.(*atomic.Pointer[roomTick])
	next := &roomTick{RoomTick: rt, at: at}
	if prev := p.Load(); prev != nil && at.After(prev.at) {
		next.every = at.Sub(prev.at)
	}
	p.Store(next)
}

// room returns the latest tick of the promotion's room, if any.
func (t *Tally) room(id string) (roomTick, bool) {
	v, ok := t.rooms.Load(id)
	if !ok {
		return roomTick{}, false
	}
	rt := v.(*atomic.Pointer[roomTick]).Load()
	if rt == nil {
		return roomTick{}, false
	}
	return *rt, true
}

// Totals returns the promotion's counts; zeros if it has none.
func (t *Tally) Totals(promotionID string) Totals {
	out := Totals{Rejected: map[string]int64{}}
	v, ok := t.m.Load(promotionID)
	if !ok {
		return out
	}
	c := v.(*counters)
	out.Accepted, out.Issued = c.accepted.Load(), c.issued.Load()
	for i := range c.rejected {
		if n := c.rejected[i].Load(); n > 0 {
			out.Rejected[RejectCodes[i]] = n
		}
	}
	return out
}

// ids returns the promotions with an entry (counts or a room's tick),
// sorted.
func (t *Tally) ids() []string {
	var out []string
	t.m.Range(func(k, _ any) bool {
		out = append(out, k.(string))
		return true
	})
	t.rooms.Range(func(k, _ any) bool {
		if _, ok := t.m.Load(k); !ok {
			out = append(out, k.(string))
		}
		return true
	})
	sort.Strings(out)
	return out
}

// has reports whether the promotion has an entry.
func (t *Tally) has(id string) bool {
	_, counted := t.m.Load(id)
	_, ticked := t.rooms.Load(id)
	return counted || ticked
}

// forget drops the promotion's entry. A count added or a tick recorded by
// a goroutine that loaded the entry just before is lost; the Hub forgets
// only entries idle for a day.
func (t *Tally) forget(id string) {
	t.m.Delete(id)
	t.rooms.Delete(id)
}
