package promotion

// AfterRecheck has m call f after each periodic re-check of its loop.
func AfterRecheck(m *Manager, f func()) { m.afterRecheck.Store(&f) }
