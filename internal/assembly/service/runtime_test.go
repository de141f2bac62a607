package service

import (
	"log/slog"
	"runtime/debug"
	"testing"
)

// TestTuneGC: with no GOGC in the environment the collector's target is
// DefaultGOGC; an operator's GOGC is left alone.
func TestTuneGC(t *testing.T) {
	// Not parallel: the collector's target is the process's.
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	log := slog.New(slog.DiscardHandler)
	tuneGC(func(string) string { return "" }, log)
	if got := debug.SetGCPercent(100); got != DefaultGOGC {
		t.Errorf("no GOGC: target %d, want %d", got, DefaultGOGC)
	}
	tuneGC(func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	}, log)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100: target %d, want it left at 100", got)
	}
}
