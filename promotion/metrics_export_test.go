package promotion

import "time"

// SetMetricsClock makes now the clock of m's series computed at scrape
// time; call it before m is used. now must be safe for concurrent use.
func SetMetricsClock(m *Metrics, now func() time.Time) { m.now = now }

// Settled is settled, for its table test.
var Settled = settled

// RemainingCached is how many promotions' remaining gauges m holds.
func RemainingCached(m *Metrics) int { return len(m.remainingOf.load()) }
