package stream

import "time"

// The decisions of a pool, kept apart from its I/O so they can be tested
// exhaustively: scaling (Spring AMQP SimpleMessageListenerContainer style),
// the initial consumer count, the idle timer and the backoffs.

// ScaleAction is what a [ScalePolicy] decides after one read.
type ScaleAction int

// Scale actions.
const (
	ScaleHold ScaleAction = iota // keep the consumer count
	ScaleUp                      // start one consumer
	ScaleDown                    // stop one consumer
)

func (a ScaleAction) String() string {
	switch a {
	case ScaleUp:
		return "up"
	case ScaleDown:
		return "down"
	default:
		return "hold"
	}
}

// ScalePolicy is the consumer scaling policy of Spring AMQP's
// SimpleMessageListenerContainer applied to a stream pool: add one consumer
// after ActiveTrigger consecutive full batches if StartMinInterval passed since
// the last start; stop one after IdleTrigger consecutive reads that were not
// full if StopMinInterval passed since the last stop; always within Min..Max.
type ScalePolicy struct {
	Min, Max                          int
	ActiveTrigger, IdleTrigger        int
	StartMinInterval, StopMinInterval time.Duration
}

// ScaleState is what the policy remembers between reads.
type ScaleState struct {
	Consumers       int       // consumers running now
	ConsecutiveFull int       // full batches in a row
	ConsecutiveIdle int       // empty or partial reads in a row
	LastStarted     time.Time // last consumer start (zero: never)
	LastStopped     time.Time // last consumer stop (zero: never)
}

// Next returns the state after one read (full: the read returned a whole
// batch) at time now and the action to apply. The returned state already
// counts the action: the caller must start or stop one consumer, and call
// Undo if it could not.
func (p ScalePolicy) Next(s ScaleState, full bool, now time.Time) (ScaleState, ScaleAction) {
	if full {
		s.ConsecutiveIdle = 0
		s.ConsecutiveFull++
		if s.ConsecutiveFull < p.ActiveTrigger {
			return s, ScaleHold
		}
		s.ConsecutiveFull = 0
		if s.Consumers >= p.Max || (!s.LastStarted.IsZero() && now.Sub(s.LastStarted) < p.StartMinInterval) {
			return s, ScaleHold
		}
		s.Consumers++
		s.LastStarted = now
		return s, ScaleUp
	}
	s.ConsecutiveFull = 0
	s.ConsecutiveIdle++
	if s.ConsecutiveIdle < p.IdleTrigger {
		return s, ScaleHold
	}
	s.ConsecutiveIdle = 0
	if s.Consumers <= p.Min || (!s.LastStopped.IsZero() && now.Sub(s.LastStopped) < p.StopMinInterval) {
		return s, ScaleHold
	}
	s.Consumers--
	s.LastStopped = now
	return s, ScaleDown
}

// InitialConsumers is the consumer count a pool starts with in one process
// for a stream expected to carry expectedTotal entries: one per
// DefaultExpectedPerConsumer entries, clamped to min..max.
func InitialConsumers(expectedTotal int64, minConsumers, maxConsumers int) int {
	n := int64(minConsumers)
	if expectedTotal > 0 {
		n = (expectedTotal + DefaultExpectedPerConsumer - 1) / DefaultExpectedPerConsumer
	}
	return int(min(max(n, int64(minConsumers)), int64(maxConsumers)))
}

// idleDue reports whether a pool that last got a message at last should
// check whether it may stop: timeout passed and the previous check (if any)
// is at least a recheck interval old.
func idleDue(now, last, lastCheck time.Time, timeout time.Duration) bool {
	if timeout < 0 || now.Sub(last) < timeout {
		return false
	}
	return lastCheck.IsZero() || now.Sub(lastCheck) >= idleRecheck(timeout)
}

// idleRecheck is how long a pool that was not drained waits before asking
// Redis again.
func idleRecheck(timeout time.Duration) time.Duration {
	return max(timeout/4, time.Millisecond)
}

// pollDelay is the sleep after the n-th empty read in a row (n from 1): a
// quarter of the interval, then half, then the whole interval, so a burst
// right after a quiet spell is picked up fast and a quiet pool settles at one
// read per interval.
func pollDelay(n int, interval time.Duration) time.Duration {
	switch {
	case n <= 1:
		return max(interval/4, time.Millisecond)
	case n == 2:
		return max(interval/2, time.Millisecond)
	default:
		return interval
	}
}

// backoff is the pause after the n-th failure in a row (n from 1): base
// doubling up to limit.
func backoff(n int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
