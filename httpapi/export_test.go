package httpapi

// SetKeyedHook makes s call f once a keyed admin request holds its
// Idempotency-Key record, before its handler runs.
func SetKeyedHook(s *Server, f func()) { s.testHookKeyed = f }
