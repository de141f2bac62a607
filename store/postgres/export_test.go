package postgres

import "context"

// OutboxLockKey is outboxLockKey, for tests that play a slow writer.
var OutboxLockKey = outboxLockKey

// MigrateUpTo applies the migrations numbered up to version only: a
// database as an earlier release left it.
func MigrateUpTo(ctx context.Context, s *Store, version int) error {
	return s.migrateUpTo(ctx, version)
}
