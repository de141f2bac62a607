package sqlstore

import (
	"time"

	"github.com/dibsio/dibs/store"
)

// RevokeSuffix ends the claim id of the ledger entry that debits a revoked
// claim's points: "<claim_id>:revoke", one per claim.
const RevokeSuffix = ":revoke"

// ChangeSet returns the SET list of an UPDATE of promotions that applies c,
// with its arguments; place numbers the placeholders from 1, encode sends a
// time. A change of nothing sets the id to itself, so the UPDATE still
// returns the row.
func ChangeSet(c store.PromotionChange, place func(n int) string, encode func(time.Time) any) (string, []any) {
	var (
		set  string
		args []any
	)
	add := func(col string, v any) {
		args = append(args, v)
		if set != "" {
			set += ", "
		}
		set += col + " = " + place(len(args))
	}
	if c.Name != nil {
		add("name", *c.Name)
	}
	if c.Stock != nil {
		add("stock", *c.Stock)
	}
	if c.EndsAt != nil {
		add("ends_at", encode(*c.EndsAt))
	}
	if c.Paused != nil {
		add("held", *c.Paused) // the column keeps its first name (see PromotionCols)
	}
	if c.RevokeReturnsStock != nil {
		add("revoke_returns_stock", *c.RevokeReturnsStock)
	}
	if w := c.WaitingRoom; w != nil {
		if w.AdmitPerSecond != nil {
			add("waiting_room_admit_per_second", *w.AdmitPerSecond)
		}
		if w.MaxActive != nil {
			add("waiting_room_max_active", *w.MaxActive)
		}
		if w.Message != nil {
			add("waiting_room_message", *w.Message)
		}
		if w.PowDifficulty != nil {
			add("waiting_room_pow_difficulty", *w.PowDifficulty)
		}
		if w.Page != nil {
			add("waiting_room_page", EncodeRoomPage(w.Page.To))
		}
	}
	if set == "" {
		set = "id = id"
	}
	return set, args
}
