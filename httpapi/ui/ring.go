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
// this instance's counts, always, and the promotion's own counts, read
// from Redis, while a dashboard was open.
type sample struct {
	at time.Time
	// This instance's counts since it started (the Tally).
	accepted, rejected, issued int64
	// watched: the counts below were read (a dashboard was open).
	watched             bool
	gAccepted, gSettled int64
	lag                 float64 // the oldest unsettled claim's age, seconds
	room                bool    // the room's counts below were read
	waiting, admitted   int64
	abandoned           int64
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
// issued or showed. It belongs to the Hub's loop goroutine.
type history struct {
	size  int
	by    map[string]*ring
	tally *Tally
}

func newHistory(size int, t *Tally) *history {
	return &history{size: size, by: map[string]*ring{}, tally: t}
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
		if _, ok := h.tally.m.Load(id); !ok {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		t := h.tally.Totals(id)
		s := sample{at: now, accepted: t.Accepted, rejected: t.RejectedSum(), issued: t.Issued}
		p := listed[id]
		if p != nil {
			s.watched, s.gAccepted, s.gSettled, s.lag = true, p.Accepted, p.Issued+p.Failed, p.IssueLagSeconds
			if p.Room != nil {
				s.room, s.waiting, s.admitted, s.abandoned = true, p.Room.Waiting, p.Room.Admitted, p.Room.Abandoned
			}
		}
		r := h.by[id]
		if r == nil {
			r = &ring{buf: make([]sample, h.size), changed: now}
			h.by[id] = r
		}
		prev, ok := r.last()
		if ok {
			s = rates(prev, s)
			if s.accepted != prev.accepted || s.rejected != prev.rejected || s.issued != prev.issued {
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

// rates derives s's rates from prev: claims and settled claims per second
// from the promotion's own counts when both samples read them, else from
// this instance's; refusals per second from this instance's (no other
// figure exists); the room's from its counts when both read them. Never
// negative (a count that fell, after a restart or a rebuild, is no rate).
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
		s.admits, s.abandons = rate(prev.admitted, s.admitted), rate(prev.abandoned, s.abandoned)
	}
	return s
}

// point is a sample as EventHistory carries it: [unix_ms, claims/s,
// rejected/s, settled/s, issue lag s, waiting, admitted/s, abandoned/s];
// the last four are null where they were not read.
func (s sample) point() []any {
	pt := []any{s.at.UnixMilli(), s.claims, s.rejects, s.issues, nil, nil, nil, nil}
	if s.watched {
		pt[4] = s.lag
	}
	if s.room {
		pt[5], pt[6], pt[7] = s.waiting, s.admits, s.abandons
	}
	return pt
}

// quiet is whether the sample has nothing to draw: no rate, nothing read.
func (s sample) quiet() bool {
	return !s.watched && !s.room && s.claims == 0 && s.rejects == 0 && s.issues == 0
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
	return pt[1] == 0.0 && pt[2] == 0.0 && pt[3] == 0.0 && pt[4] == nil && pt[5] == nil
}
