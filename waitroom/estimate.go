package waitroom

import (
	"math"
	"time"
)

// Allowed is how many users a room admitting ratePerSecond users per second
// from openMS may have admitted in total at nowMS (all Redis time in ms):
// ⌊ratePerSecond × (nowMS − openMS) / 1000⌋, and 0 before the opening. The
// tick script computes the same in integers.
func Allowed(ratePerSecond, openMS, nowMS int64) int64 {
	if nowMS <= openMS || ratePerSecond <= 0 {
		return 0
	}
	return ratePerSecond * (nowMS - openMS) / 1000
}

// Estimate is an estimated wait: a point and a range.
type Estimate struct {
	// Wait is the expected wait.
	Wait time.Duration
	// Low and High bound the wait.
	Low, High time.Duration
}

// EstimateWait estimates the wait of the user at position (1 = next) when
// the room admits at ratePerSecond and the line was measured moving at
// measured places per second (0 when not measured yet). The line moves at
// least as fast as admission (skipped users make it faster), so the range
// runs from the faster of the two rates to the slower; the point uses the
// measured rate when there is one. A position of 0 or less waits 0.
func EstimateWait(position int64, ratePerSecond int64, measured float64) Estimate {
	if position <= 0 || ratePerSecond <= 0 {
		return Estimate{}
	}
	rate := float64(ratePerSecond)
	fast, slow := rate, rate
	valid := measured > 0 && !math.IsNaN(measured) && !math.IsInf(measured, 0)
	if valid {
		fast, slow = max(rate, measured), min(rate, measured)
	}
	point := rate
	if valid {
		point = measured
	}
	secs := func(places float64, perSecond float64) time.Duration {
		return time.Duration(places / perSecond * float64(time.Second))
	}
	return Estimate{
		Wait: secs(float64(position), point),
		Low:  secs(float64(position-1), fast),
		High: secs(float64(position), slow),
	}
}

// StockExpectedToLast tells whether the stock is expected to last to the
// user at position: whether the units neither taken nor promised to a live
// pass (available) cover everyone up to and including the user.
func StockExpectedToLast(position, available int64) bool {
	return position >= 1 && position <= available
}
