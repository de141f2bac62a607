package ui

import (
	"encoding/json"
	"time"
)

// ForgetAfter is how long a promotion's ring and Tally entry are kept
// after its last change (nothing counted on this instance, no page
// showing it).
const ForgetAfter = 24 * time.Hour

// sample is one interval of a promotion as the Hub's loop recorded it:
// this instance's counts, always; the waiting room's totals whenever this
// instance ticks the room (the latest tick, Tally.Room); and the
// promotion's own counts, read from Redis, while a dashboard was open.
type sample struct {
	at time.Time
	// This instance's counts since it started (the Tally).
	accepted, rejected, issued int64
	// watched: the counts below were read (a dashboard was open).
	watched             bool
	gAccepted, gSettled int64
	lag                 float64 // the oldest unsettled claim's age, seconds
	// room: the room's totals below are known, as of roomAt: read with
	// the promotion, or from the room's latest tick here.
	room                bool
	roomAt              time.Time
	admitted, abandoned int64
	// line: waiting is known (read, or carried by the tick).
	line    bool
	waiting int64
	// Rates from the sample before.
	claims, rejects, issues, admits, abandons float64
}

// ring is one promotion's samples, a bounded circular buffer.
type ring struct {
	buf     []sample
	next, n int
	changed time.Time // when a count last moved, or a page last showed it
}

func (r *ring) push(s sample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	r.n = min(r.n+1, len(r.buf))
}

// last returns the newest sample, if any.
func (r *ring) last() (sample, bool) {
	if r.n == 0 {
		return sample{}, false
	}
	return r.buf[(r.next-1+len(r.buf))%len(r.buf)], true
}

// each calls f on the samples, oldest first.
func (r *ring) each(f func(i int, s sample)) {
	start := (r.next - r.n + len(r.buf)) % len(r.buf)
	for i := range r.n {
		f(i, r.buf[(start+i)%len(r.buf)])
	}
}

// history keeps the rings of every promotion this instance answered,
// issued, ticked the room of or showed. It belongs to the Hub's loop
// goroutine.
type history struct {
	size     int
	interval time.Duration // between two samples
	by       map[string]*ring
	tally    *Tally
}

func newHistory(size int, t *Tally, interval time.Duration) *history {
	return &history{size: size, interval: interval, by: map[string]*ring{}, tally: t}
}

// add records one interval at now: every promotion of the Tally, and the
// promotions ps read (nil while no dashboard is open), whose rates it
// fills in. Rings idle for ForgetAfter are dropped with their Tally
// entries.
func (h *history) add(now time.Time, ps []Promotion) {
	listed := make(map[string]*Promotion, len(ps))
	for i := range ps {
		listed[ps[i].ID] = &ps[i]
	}
	ids := h.tally.ids()
	for id := range listed {
		if !h.tally.has(id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		p := listed[id]
		s := h.sample(id, now, p)
		r := h.by[id]
		if r == nil {
			r = &ring{buf: make([]sample, h.size), changed: now}
			h.by[id] = r
		}
		prev, ok := r.last()
		if ok {
			s = rates(prev, s)
			if s.accepted != prev.accepted || s.rejected != prev.rejected || s.issued != prev.issued ||
				s.room && (s.admitted != prev.admitted || s.abandoned != prev.abandoned || s.waiting != prev.waiting) {
				r.changed = now
			}
		}
		if p != nil {
			r.changed = now
			p.ClaimsPerSecond, p.RejectedPerSecond = s.claims, s.rejects
			if p.Room != nil {
				p.Room.AdmittedPerSecond = s.admits
			}
		}
		r.push(s)
	}
	for id, r := range h.by {
		if now.Sub(r.changed) >= ForgetAfter {
			delete(h.by, id)
			h.tally.forget(id)
		}
	}
}

// sample is promotion id's sample at now: this instance's counts, the
// room's latest tick here while fresh, and what was read of the promotion
// (p, nil if not read), which the room's figures are taken from when it
// has them.
func (h *history) sample(id string, now time.Time, p *Promotion) sample {
	t := h.tally.Totals(id)
	s := sample{at: now, accepted: t.Accepted, rejected: t.RejectedSum(), issued: t.Issued}
	if rt, ok := h.tally.room(id); ok && h.fresh(rt, now) {
		s.room, s.roomAt, s.admitted, s.abandoned = true, rt.at, rt.Admitted, rt.Abandoned
		if rt.Waiting != nil {
			s.line, s.waiting = true, *rt.Waiting
		}
	}
	if p != nil {
		s.watched, s.gAccepted, s.gSettled, s.lag = true, p.Accepted, p.Issued+p.Failed, p.IssueLagSeconds
		if p.Room != nil {
			s.room, s.roomAt, s.admitted, s.abandoned = true, now, p.Room.Admitted, p.Room.Abandoned
			s.line, s.waiting = true, p.Room.Waiting
		}
	}
	return s
}

// fresh is whether the room's tick rt still stands for the room at now:
// it came less than three intervals ago, or less than two of the room's
// own tick periods (at most a minute) ago, so a room ticked more slowly
// than the Hub samples keeps its figures between ticks, and one no longer
// ticked here (its lease went to another instance, its promotion ended)
// drops out of the ring within seconds.
func (h *history) fresh(rt roomTick, now time.Time) bool {
	age := now.Sub(rt.at)
	return age < 3*h.interval || age < 2*min(rt.every, time.Minute)
}

// rates derives s's rates from prev: claims and settled claims per second
// from the promotion's own counts when both samples read them, else from
// this instance's; refusals per second from this instance's (no other
// figure exists); the room's from its totals when both know them, over the
// time between the two figures (a tick seen by two samples carries the
// rate of the sample before on). Never negative (a count that fell, after
// a restart or a rebuild, is no rate).
func rates(prev, s sample) sample {
	dt := s.at.Sub(prev.at).Seconds()
	if dt <= 0 {
		return s
	}
	rate := func(a, b int64) float64 { return max(float64(b-a)/dt, 0) }
	if prev.watched && s.watched {
		s.claims, s.issues = rate(prev.gAccepted, s.gAccepted), rate(prev.gSettled, s.gSettled)
	} else {
		s.claims, s.issues = rate(prev.accepted, s.accepted), rate(prev.issued, s.issued)
	}
	s.rejects = rate(prev.rejected, s.rejected)
	if prev.room && s.room {
		if rdt := s.roomAt.Sub(prev.roomAt).Seconds(); rdt > 0 {
			rrate := func(a, b int64) float64 { return max(float64(b-a)/rdt, 0) }
			s.admits, s.abandons = rrate(prev.admitted, s.admitted), rrate(prev.abandoned, s.abandoned)
		} else {
			s.admits, s.abandons = prev.admits, prev.abandons
		}
	}
	return s
}

// point is a sample as EventHistory carries it: [unix_ms, claims/s,
// rejected/s, settled/s, issue lag s, waiting, admitted/s, abandoned/s];
// the lag is null where it was not read, waiting where neither read nor
// ticked, and the room's rates where its totals were not known.
func (s sample) point() []any {
	pt := []any{s.at.UnixMilli(), s.claims, s.rejects, s.issues, nil, nil, nil, nil}
	if s.watched {
		pt[4] = s.lag
	}
	if s.line {
		pt[5] = s.waiting
	}
	if s.room {
		pt[6], pt[7] = s.admits, s.abandons
	}
	return pt
}

// quiet is whether the sample has nothing to draw: no rate, no lag nor
// line known.
func (s sample) quiet() bool {
	return !s.watched && !s.line && s.claims == 0 && s.rejects == 0 && s.issues == 0 && s.admits == 0 && s.abandons == 0
}

// marshal is the data of an EventHistory. A run of quiet samples is sent
// as its first and last, so a line drawn through the points is the same.
func (h *history) marshal(interval time.Duration) []byte {
	out := struct {
		IntervalMS int64              `json:"interval_ms"`
		Series     map[string][][]any `json:"series"`
	}{IntervalMS: interval.Milliseconds(), Series: make(map[string][][]any, len(h.by))}
	for id, r := range h.by {
		var pts [][]any
		var prevQuiet bool
		r.each(func(_ int, s sample) {
			q := s.quiet()
			if q && prevQuiet {
				// Inside a quiet run: keep only its ends.
				if len(pts) > 1 && pointQuiet(pts[len(pts)-2]) {
					pts = pts[:len(pts)-1]
				}
			}
			pts = append(pts, s.point())
			prevQuiet = q
		})
		out.Series[id] = pts
	}
	data, _ := json.Marshal(out) // plain data: cannot fail
	return data
}

// pointQuiet is quiet for a point.
func pointQuiet(pt []any) bool {
	zero := func(v any) bool { return v == nil || v == 0.0 }
	return pt[1] == 0.0 && pt[2] == 0.0 && pt[3] == 0.0 && pt[4] == nil && pt[5] == nil && zero(pt[6]) && zero(pt[7])
}
