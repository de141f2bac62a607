package sqlstore

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// timeLayouts are the text forms ParseTime reads: RFC 3339 and SQLite's own
// date and time forms, with 'T' or a space between date and time, with or
// without seconds and with or without a zone (no zone is UTC), and
// time.Time's String form. A fractional second is read wherever there are
// seconds, whatever its length.
var timeLayouts = func() []string {
	var ls []string
	for _, clock := range []string{"15:04:05", "15:04"} {
		for _, sep := range []string{"T", " "} {
			for _, zone := range []string{"Z07:00", "Z0700", "Z07", " Z07:00", " Z0700", ""} {
				ls = append(ls, "2006-01-02"+sep+clock+zone)
			}
		}
	}
	return append(ls, "2006-01-02 15:04:05 -0700 MST", "2006-01-02")
}()

// ParseTime reads a time stored as text in any form a SQL database may
// hold: RFC 3339 with any fractional seconds and any offset (or a
// lower-case t and z), SQLite's forms ("2006-01-02 15:04:05.000", with or
// without a zone; no zone is UTC), time.Time's String form, or a number: a
// Julian day number (SQLite's julianday(), below 10^7), else Unix time in
// seconds, milliseconds, microseconds or nanoseconds, told apart by
// magnitude. The time is returned in UTC.
func ParseTime(s string) (time.Time, error) {
	v := strings.TrimSpace(s)
	// time.Time's String form may end with the monotonic clock reading.
	if i := strings.Index(v, " m="); i >= 0 {
		v = v[:i]
	}
	if t, ok := parseNumericTime(v); ok {
		return t, nil
	}
	upper := strings.ToUpper(v)
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, upper); err == nil {
			return t.UTC(), nil
		}
		if upper != v {
			// Zone abbreviations are case-sensitive in the String form.
			if t, err := time.Parse(layout, v); err == nil {
				return t.UTC(), nil
			}
		}
	}
	return time.Time{}, fmt.Errorf("stored time %q: not a time in a known form", s)
}

// Bounds of the numeric time forms: Julian day numbers sit below
// julianDayLimit; Unix times in seconds below unixSecondsLimit (the year
// 5138), and each finer unit a thousand times higher.
const (
	julianDayLimit   = 1e7
	unixEpochJulian  = 2440587.5
	unixSecondsLimit = 1e11
)

// parseNumericTime reads a Julian day number or a Unix time; ok is false if
// v is no positive number.
func parseNumericTime(v string) (time.Time, bool) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
		switch {
		case n < julianDayLimit:
			return julianDay(float64(n)), true
		case n < unixSecondsLimit:
			return time.Unix(n, 0).UTC(), true
		case n < unixSecondsLimit*1e3:
			return time.UnixMilli(n).UTC(), true
		case n < unixSecondsLimit*1e6:
			return time.UnixMicro(n).UTC(), true
		}
		return time.Unix(0, n).UTC(), true
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return time.Time{}, false
	}
	if f < julianDayLimit {
		return julianDay(f), true
	}
	for _, unit := range []time.Duration{time.Second, time.Millisecond, time.Microsecond} {
		if f < unixSecondsLimit*float64(time.Second/unit) {
			sec, frac := math.Modf(f * float64(unit) / float64(time.Second))
			return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
		}
	}
	if f > math.MaxInt64 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(f)).UTC(), true
}

// julianDay converts a Julian day number to a time, to the millisecond as
// SQLite keeps it.
func julianDay(d float64) time.Time {
	ms := math.Round((d - unixEpochJulian) * 86400e3)
	return time.UnixMilli(int64(ms)).UTC()
}
