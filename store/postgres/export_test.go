package postgres

import "context"

// OutboxLockKey is outboxLockKey, for tests that play a slow writer.
var OutboxLockKey = outboxLockKey

// MigrateUpTo applies the migrations numbered up to version only: a
// database as an earlier release left it.
func MigrateUpTo(ctx context.Context, s *Store, version int) error {
	return s.migrateUpTo(ctx, version)
}

// MigrateOnly applies migration version alone: after MigrateUpTo, the
// columns of a later migration that the test's writes need before the
// migration under test runs.
func MigrateOnly(ctx context.Context, s *Store, version int) error {
	return s.migrateWhere(ctx, func(v int) bool { return v == version })
}
