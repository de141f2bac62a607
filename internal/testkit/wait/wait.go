// Package wait gives tests one way to wait for a condition: checked on a
// ticker until it holds or a deadline passes, never by sleeping a guessed
// time.
package wait

import (
	"testing"
	"time"
)

// Tick is how often a condition is checked.
const Tick = 5 * time.Millisecond

// Until reports whether cond held within timeout, checking it every Tick
// and once more at the deadline.
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(Tick)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
}

// For fails the test unless cond holds within timeout; what names the
// condition in the failure.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// NoError fails the test unless f returns nil within timeout, reporting the
// last error f returned.
func NoError(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	var last error
	if !Until(timeout, func() bool { last = f(); return last == nil }) {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, last)
	}
}
