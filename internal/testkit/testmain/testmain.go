// Package testmain runs a test binary's tests, then the cleanups of its
// binary-wide helpers, then a goroutine-leak check. The helpers that start
// shared servers (redistest, pgtest) register how to stop them here, so one
// TestMain stops every server the binary started, whichever helpers it uses:
//
//	func TestMain(m *testing.M) { testmain.Main(m) }
//
// redistest.Main and pgtest.Main are this Main with their own helpers'
// leak exceptions; call exactly one of them.
package testmain

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

var (
	mu       sync.Mutex
	cleanups []func() // run by Main in reverse order
)

// RegisterCleanup adds a function that Main runs after the tests, before it
// checks for leaked goroutines. Functions run in reverse order of
// registration, like t.Cleanup.
func RegisterCleanup(f func()) {
	mu.Lock()
	defer mu.Unlock()
	cleanups = append(cleanups, f)
}

func runCleanups() {
	mu.Lock()
	fs := cleanups
	cleanups = nil
	mu.Unlock()
	for _, f := range slices.Backward(fs) {
		f()
	}
}

// Main runs the tests, then every function given to RegisterCleanup, then
// fails the binary if goroutines leaked from a successful run. opts are
// passed to goleak, for goroutines a library ends by itself later.
func Main(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	runCleanups()
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
