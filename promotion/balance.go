package promotion

import (
	"context"

	"github.com/dibsio/dibs/store"
)

// Balance returns the user's points: the sum of the ledger entries that
// point promotions' claims credited, over every promotion. A user without
// entries has a zero balance. The user id must pass ValidID
// (a *ValidationError naming user_id otherwise).
func (m *Manager) Balance(ctx context.Context, userID string) (store.Balance, error) {
	if !ValidID(userID) {
		return store.Balance{}, invalid("user_id", "must be 1-64 characters from A-Z a-z 0-9 _ - . : @, starting with a letter or digit")
	}
	b, err := m.st.Balance(ctx, userID)
	return b, domainErr(err)
}
