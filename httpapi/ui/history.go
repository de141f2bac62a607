package ui

import (
	"encoding/json"
	"time"
)

// sample is one snapshot's counts of a promotion, and the rates derived
// from it and the sample before.
type sample struct {
	at                          time.Time
	accepted, settled, admitted int64
	claimsPerSecond, lag, admit float64
}

// series is a promotion's samples, oldest first, at most max of them.
type series []sample

// history keeps the samples of each promotion for the charts. It belongs
// to the Hub's loop goroutine.
type history struct {
	max int
	by  map[string]series
}

func newHistory(max int) *history {
	return &history{max: max + 1, by: map[string]series{}}
}

// add records the promotions' counts at now, fills in their rates (see
// rates), and forgets promotions no longer listed.
func (h *history) add(now time.Time, ps []Promotion) {
	seen := make(map[string]bool, len(ps))
	for i := range ps {
		p := &ps[i]
		seen[p.ID] = true
		s := sample{at: now, accepted: p.Accepted, settled: p.Issued + p.Failed}
		if p.Room != nil {
			s.admitted = p.Room.Admitted
		}
		ser := h.by[p.ID]
		s = rates(ser, s)
		if len(ser) == h.max {
			copy(ser, ser[1:])
			ser = ser[:len(ser)-1]
		}
		h.by[p.ID] = append(ser, s)
		p.ClaimsPerSecond, p.IssueLagSeconds = s.claimsPerSecond, s.lag
		if p.Room != nil {
			p.Room.AdmittedPerSecond = s.admit
		}
	}
	for id := range h.by {
		if !seen[id] {
			delete(h.by, id)
		}
	}
}

// rates derives s's rates from the samples before it: claims/s and
// admissions/s from the last sample (0 for the first, never negative), and
// the issue lag: how long ago the latest sample was taken whose accepted
// count the settled count (issued + dead-lettered) has reached — every claim
// accepted by then is settled, so the oldest unsettled claim is at most
// that old. 0 when everything is settled; the whole span kept when no kept
// sample qualifies.
func rates(ser series, s sample) sample {
	if n := len(ser); n > 0 {
		prev := ser[n-1]
		if dt := s.at.Sub(prev.at).Seconds(); dt > 0 {
			s.claimsPerSecond = max(float64(s.accepted-prev.accepted)/dt, 0)
			s.admit = max(float64(s.admitted-prev.admitted)/dt, 0)
		}
	}
	if s.settled >= s.accepted {
		return s
	}
	for i := len(ser) - 1; i >= 0; i-- {
		if ser[i].accepted <= s.settled {
			s.lag = s.at.Sub(ser[i].at).Seconds()
			return s
		}
	}
	if len(ser) > 0 {
		s.lag = s.at.Sub(ser[0].at).Seconds()
	}
	return s
}

// marshal is the data of an EventHistory.
func (h *history) marshal(interval time.Duration) []byte {
	out := struct {
		IntervalMS int64                   `json:"interval_ms"`
		Series     map[string][][4]float64 `json:"series"`
	}{IntervalMS: interval.Milliseconds(), Series: make(map[string][][4]float64, len(h.by))}
	for id, ser := range h.by {
		pts := make([][4]float64, len(ser))
		for i, s := range ser {
			pts[i] = [4]float64{float64(s.at.UnixMilli()), s.claimsPerSecond, s.lag, s.admit}
		}
		out.Series[id] = pts
	}
	data, _ := json.Marshal(out) // plain data: cannot fail
	return data
}
