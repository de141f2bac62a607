package service

import (
	"log/slog"
	"runtime/debug"
)

// DefaultGOGC is the garbage collector's target `dibs serve` sets when the
// environment sets no GOGC: the heap may grow to five times what is live
// before a collection, where Go's default of 100 lets it double. A busy
// instance allocates tens of MB a second for a live heap of a few MB, so
// at 100 it collects several times a second; see docs/tuning.md, "Runtime".
// An operator's GOGC (or GOMEMLIMIT, which bounds the heap whatever GOGC
// says) wins.
const DefaultGOGC = 400

// tuneGC sets the collector's target to DefaultGOGC unless getenv("GOGC")
// is set, and logs what it did.
func tuneGC(getenv func(string) string, log *slog.Logger) {
	if v := getenv("GOGC"); v != "" {
		log.Debug("garbage collector target from the environment", "GOGC", v)
		return
	}
	debug.SetGCPercent(DefaultGOGC)
	log.Debug("garbage collector target set", "GOGC", DefaultGOGC)
}
