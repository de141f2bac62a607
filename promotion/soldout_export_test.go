package promotion

// Remembers returns the code the sold-out memory of m would answer a claim
// of promotion id with ("sold_out" or "ended"), or "" when it holds
// nothing live of it.
func Remembers(m *Manager, id string) string {
	e := (*m.sold.snap.Load())[id]
	if e == nil || e.dropped.Load() || m.cfg.Now().UnixNano() >= e.until {
		return ""
	}
	if e.err == ErrSoldOut && e.holders == nil {
		return "" // sold_out is not answered without the holders
	}
	return e.code
}
