package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Opener opens a backend's store for a database URL of its scheme.
type Opener func(ctx context.Context, url string) (Store, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes a backend available to [Open] under a URL scheme. The
// backends register themselves when imported (sqlite: "sqlite"; postgres:
// "postgres" and "postgresql"), the way database/sql drivers do: the
// backends import this package, so it cannot import them. Registering a
// scheme twice panics.
func Register(scheme string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	scheme = strings.ToLower(scheme)
	if _, dup := openers[scheme]; dup {
		panic("store: Register called twice for scheme " + scheme)
	}
	openers[scheme] = open
}

// backendPackages names the package to import for each known scheme, for
// the error when it was not imported.
var backendPackages = map[string]string{
	"sqlite":     "github.com/dibsio/dibs/store/sqlite",
	"postgres":   "github.com/dibsio/dibs/store/postgres",
	"postgresql": "github.com/dibsio/dibs/store/postgres",
}

// Open opens the store for a database URL, choosing the backend by scheme:
// sqlite://PATH (sqlite://dibs.db is relative to the working directory,
// sqlite:///var/lib/dibs/dibs.db absolute) or postgres://... /
// postgresql://... . The backend's package must be imported (blank imports
// of store/sqlite and store/postgres do). Open does not apply the schema:
// call Migrate. A PostgreSQL store connects lazily, so call Ping to check
// the database answers.
func Open(ctx context.Context, url string) (Store, error) {
	scheme, _, ok := strings.Cut(url, "://")
	if !ok || scheme == "" {
		// The URL is not quoted: it may hold a password.
		return nil, fmt.Errorf("store: database URL has no scheme (want sqlite://PATH or postgres://...)")
	}
	scheme = strings.ToLower(scheme)
	openersMu.RLock()
	open := openers[scheme]
	openersMu.RUnlock()
	if open == nil {
		if pkg, known := backendPackages[scheme]; known {
			return nil, fmt.Errorf("store: no backend registered for %s:// (import %s)", scheme, pkg)
		}
		openersMu.RLock()
		schemes := make([]string, 0, len(openers))
		for s := range openers {
			schemes = append(schemes, s)
		}
		openersMu.RUnlock()
		slices.Sort(schemes)
		return nil, fmt.Errorf("store: unsupported database URL scheme %q (registered: %s)", scheme, strings.Join(schemes, ", "))
	}
	return open(ctx, url)
}
