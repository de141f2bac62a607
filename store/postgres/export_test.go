package postgres

import (
	"context"
	"math"
)

// OutboxLockKey is outboxLockKey, for tests that play a slow writer.
var OutboxLockKey = outboxLockKey

// MigrateUpTo applies the migrations numbered up to version only: a
// database as an earlier release left it.
func MigrateUpTo(ctx context.Context, s *Store, version int) error {
	return s.migrateUpTo(ctx, version)
}

// MigrateSkipping applies every migration but those numbered skip: a
// database as an earlier release left it, with the later, independent
// columns this release writes (so its code can write rows into it).
func MigrateSkipping(ctx context.Context, s *Store, skip ...int) error {
	return s.migrateUpTo(ctx, math.MaxInt, skip...)
}
