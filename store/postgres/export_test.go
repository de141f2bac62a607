package postgres

// OutboxLockKey is outboxLockKey, for tests that play a slow writer.
var OutboxLockKey = outboxLockKey
