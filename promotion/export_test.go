package promotion

// AfterRecheck has m call f after each periodic re-check of its loop.
func AfterRecheck(m *Manager, f func()) { m.afterRecheck.Store(&f) }

// JournalReads is how many slices of journaled claims m read from Redis.
func JournalReads(m *Manager) int64 { return m.jr.reads.Load() }

// JournalInboxPeak is the most claims m's journal goroutine found waiting
// in the inbox.
func JournalInboxPeak(m *Manager) int64 { return m.jr.peak.Load() }

// JournalFirstBlock is the memory of a journal's first block: what a
// journal of at most 8 claims with short user ids takes.
func JournalFirstBlock() int64 { return blockOverhead + firstEntries*entryBytes + firstArena }
