package promotion

// PoolNames returns the promotion name the pools of promotion id (its own
// and its segments') hand to the kind's issuer on m, nil if m's loop does
// not track it.
func PoolNames(m *Manager, id string) []string {
	h := m.known.lookup(id)
	if h == nil {
		return nil
	}
	var names []string
	for _, tag := range h.segs.Tags() {
		if sh := m.known.lookup(tag); sh != nil {
			names = append(names, sh.promo.Load().Name)
		}
	}
	return names
}
