package promotion

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/waitroom"
)

// Change is a change of a running promotion (see Manager.Patch); nil
// fields are kept.
type Change struct {
	// Name renames the promotion; only the database holds it.
	Name *string
	// Stock raises or lowers the stock, never below the claims accepted
	// (ErrStockBelowAccepted) and, with a code pool, never raised above its
	// codes (ErrNotEnoughCodes). First-come promotions only.
	Stock *int64
	// EndsAt moves the end, after StartsAt. A later end reopens a
	// promotion its end closed, until it is drained; one an admin closed
	// stays closed.
	EndsAt *time.Time
	// Paused pauses (true) or resumes (false) the promotion's claims: a
	// claim on a paused promotion gets ErrPaused. First-come promotions only.
	Paused *bool
	// RevokeReturnsStock sets whether a revoked claim's unit goes back to
	// stock (see Manager.Revoke). First-come promotions only.
	RevokeReturnsStock *bool
	// WaitingRoom changes the levers of the promotion's waiting room
	// while its line runs. Promotions with a waiting room only.
	WaitingRoom *RoomChange
}

// RoomChange changes the levers of a running waiting room (see
// Manager.Patch); nil fields are kept. Each takes effect on every instance
// at once: the room's Redis state holds them.
type RoomChange struct {
	// AdmitPerSecond is the new admission rate, 1..MaxAdmitPerSecond; the
	// allowance accrued at the old rate is kept (waitroom.Rooms.Apply).
	AdmitPerSecond *int
	// MaxActive is the new cap on live passes, 0..MaxActivePasses, 0 to
	// lift it.
	MaxActive *int
	// Message is the new message to the line ("" clears it).
	Message *string
	// PowDifficulty is the new proof-of-work difficulty,
	// 0..MaxPowDifficulty, 0 to stop asking for one.
	PowDifficulty *int
	// Page replaces the setting of the room's queue page as a whole,
	// checked as at creation (RoomPageChange.To nil resets it to the
	// page's defaults). Only the database holds it: the page reads it from
	// the instance's set of promotions (Manager.PageOf), which a change
	// made here updates before Patch returns, and the other instances'
	// at their hint or re-check.
	Page *RoomPageChange
}

// RoomPageChange replaces the setting of a waiting room's queue page (see
// RoomChange.Page): To is the new setting, nil for the page's defaults.
type RoomPageChange = store.RoomPageChange

// levers reports whether c changes a lever Redis holds (all but the page).
func (c RoomChange) levers() bool {
	return c.AdmitPerSecond != nil || c.MaxActive != nil || c.Message != nil || c.PowDifficulty != nil
}

// apply returns w with c applied.
func (c RoomChange) apply(w WaitingRoom) WaitingRoom {
	if c.AdmitPerSecond != nil {
		w.AdmitPerSecond = *c.AdmitPerSecond
	}
	if c.MaxActive != nil {
		w.MaxActive = *c.MaxActive
	}
	if c.Message != nil {
		w.Message = *c.Message
	}
	if c.PowDifficulty != nil {
		w.PowDifficulty = *c.PowDifficulty
	}
	if c.Page != nil {
		w.Page = c.Page.To
	}
	return w
}

// waitroomLevers is c's change of the levers Redis holds, as package
// waitroom takes it.
func (c RoomChange) waitroomLevers() waitroom.Levers {
	l := waitroom.Levers{Message: c.Message, PowDifficulty: c.PowDifficulty}
	if c.AdmitPerSecond != nil {
		v := int64(*c.AdmitPerSecond)
		l.AdmitPerSecond = &v
	}
	if c.MaxActive != nil {
		v := int64(*c.MaxActive)
		l.MaxActive = &v
	}
	return l
}

// store is c as the database takes it.
func (c *RoomChange) store() *store.WaitingRoomChange {
	if c == nil {
		return nil
	}
	return &store.WaitingRoomChange{AdmitPerSecond: c.AdmitPerSecond, MaxActive: c.MaxActive,
		Message: c.Message, PowDifficulty: c.PowDifficulty, Page: c.Page}
}

// changedFields names the fields of a change whose value differs between
// before and after.
func changedFields(before, after store.Promotion) []string {
	changed := []string{}
	for _, f := range []struct {
		name string
		diff bool
	}{
		{"name", before.Name != after.Name}, {"stock", before.Stock != after.Stock},
		{"ends_at", !before.EndsAt.Equal(after.EndsAt)}, {"paused", before.Paused != after.Paused},
		{"revoke_returns_stock", before.RevokeReturnsStock != after.RevokeReturnsStock},
		{"waiting_room.admit_per_second", before.WaitingRoom.AdmitPerSecond != after.WaitingRoom.AdmitPerSecond},
		{"waiting_room.max_active", before.WaitingRoom.MaxActive != after.WaitingRoom.MaxActive},
		{"waiting_room.message", before.WaitingRoom.Message != after.WaitingRoom.Message},
		{"waiting_room.pow_difficulty", before.WaitingRoom.PowDifficulty != after.WaitingRoom.PowDifficulty},
		{"waiting_room.page", !samePage(before.WaitingRoom.Page, after.WaitingRoom.Page)},
	} {
		if f.diff {
			changed = append(changed, f.name)
		}
	}
	return changed
}

// patchLease bounds how long a change holds its promotion in Redis
// between its two steps: a change that died in between is repaired from
// the database by the re-check after it.
const patchLease = 10 * time.Second

// changes applies changes of running promotions (see Manager.Patch) and
// tells every instance of them.
type changes struct {
	st    store.Store
	gate  *claim.Gate
	lc    *loopClient
	wk    *waker
	rooms *roomOps
	now   func() time.Time // Config.Now
	log   *slog.Logger
}

// patch applies c to the promotion sp as Patch describes, and returns it
// as the database holds it after the change.
func (ch *changes) patch(ctx context.Context, sp store.Promotion, c Change) (store.Promotion, error) {
	p, err := ch.prepare(ctx, sp, &c)
	if err != nil {
		return store.Promotion{}, err
	}
	rc := gateChange(p, sp.Drained, c)
	pt, err := ch.begin(ctx, p.ID, c, rc)
	if err != nil {
		return store.Promotion{}, err
	}
	// From here on the change is finished even if the caller goes away.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sideEffectTimeout)
	defer cancel()
	sp2, err := ch.write(ctx, dctx, p, c, pt)
	if err != nil {
		return store.Promotion{}, err
	}
	if err := ch.afterWrite(dctx, p.ID, c, rc.Reopen); err != nil {
		return store.Promotion{}, err
	}
	ch.wk.tellChanged(dctx, p.ID)
	// This instance's running pools issue with the changed definition (a
	// new name) before the change is answered; the others' once the hint
	// or their next re-check reaches them.
	ch.lc.awaitRefresh(dctx, p.ID)
	return sp2, nil
}

// prepare checks c against the promotion sp (normalizing it in place) and
// returns sp's definition with the size of its code pool: a raise of the
// stock above the pool's codes is refused, and so is a move of the end of
// a drained promotion.
func (ch *changes) prepare(ctx context.Context, sp store.Promotion, c *Change) (Promotion, error) {
	p := fromStore(sp)
	if p.segmented() && (c.Stock != nil || c.EndsAt != nil || c.Paused != nil) {
		return p, errSegmented("changing stock, ends_at or paused")
	}
	if err := ch.checkChange(p, c); err != nil {
		return p, err
	}
	// The gate's stock is capped by the code pool (gateStock): a raise
	// above the pool's codes is refused, one that stays under them
	// applies, and a lowered stock still above them leaves the cap.
	if err := poolCodes(ctx, ch.st, &p); err != nil {
		return p, err
	}
	if c.Stock != nil && p.codes > 0 && *c.Stock > p.codes && *c.Stock > p.Stock {
		return p, &NotEnoughCodesError{Stock: *c.Stock, Codes: p.codes}
	}
	if c.EndsAt != nil {
		e := c.EndsAt.UTC().Truncate(time.Microsecond)
		c.EndsAt = &e
		if sp.Drained && !e.Equal(p.EndsAt) {
			return p, ErrDrained
		}
	}
	return p, nil
}

// gateChange is what c changes of p in Redis (stock capped by the code
// pool, end, pause); a closed or drained promotion is not reopened.
func gateChange(p Promotion, drained bool, c Change) claim.Change {
	rc := claim.Change{EndsAt: c.EndsAt, Paused: c.Paused, Reopen: p.ClosedAt.IsZero() && !drained}
	if c.Stock != nil {
		q := p
		q.Stock = *c.Stock
		gs := q.gateStock()
		rc.Stock = &gs
	}
	return rc
}

// begin takes the promotion's change lease in Redis and applies a lowered
// stock at once (step 1 of Patch), if c changes anything Redis holds; nil
// if it does not.
func (ch *changes) begin(ctx context.Context, id string, c Change, rc claim.Change) (*claim.Patch, error) {
	if c.Stock == nil && c.EndsAt == nil && c.Paused == nil {
		return nil, nil
	}
	var pt *claim.Patch
	err := ch.lc.onGate(ctx, id, func() (err error) {
		pt, _, err = ch.gate.BeginPatch(ctx, id, rc, patchLease)
		return err
	})
	if err != nil {
		return nil, domainErr(err)
	}
	return pt, nil
}

// write writes c to the database (step 2 of Patch), then applies it in
// Redis and gives the lease pt up (step 3), under dctx; a write that
// fails sets Redis back. It returns the promotion as the database holds
// it now.
func (ch *changes) write(ctx, dctx context.Context, p Promotion, c Change, pt *claim.Patch) (store.Promotion, error) {
	sp2, err := ch.st.UpdatePromotion(dctx, p.ID, store.PromotionChange{
		Name: c.Name, Stock: c.Stock, EndsAt: c.EndsAt, Paused: c.Paused, RevokeReturnsStock: c.RevokeReturnsStock,
		WaitingRoom: c.WaitingRoom.store(), At: ch.now(),
	})
	if err != nil {
		if pt != nil {
			if uerr := pt.Undo(dctx, p.gateStock()); uerr != nil {
				ch.log.WarnContext(ctx, "change not written; the re-check sets Redis back from the database", "promotion", p.ID, "err", uerr)
			}
		}
		return store.Promotion{}, domainErr(err)
	}
	if pt != nil {
		if _, err := pt.Apply(dctx); err != nil {
			// The database holds the change: the re-check applies it once
			// the lease expires. Say so rather than claim it is in effect.
			return store.Promotion{}, fmt.Errorf("apply change of %s in Redis (the re-check applies it within %s): %w", p.ID, patchLease, err)
		}
	}
	return sp2, nil
}

// afterWrite applies what follows the database's write of c: the waiting
// room's levers in Redis, and, for an end moved later on a promotion that
// reopens, the undoing of a drain decided meanwhile.
func (ch *changes) afterWrite(dctx context.Context, id string, c Change, reopen bool) error {
	if c.WaitingRoom != nil && c.WaitingRoom.levers() {
		// After the database: a failure here leaves the change to send
		// again, never Redis ahead of the database.
		if err := ch.rooms.applyLevers(dctx, id, c.WaitingRoom.waitroomLevers()); err != nil {
			return err
		}
	}
	if c.EndsAt != nil && reopen && c.EndsAt.After(ch.now()) {
		// A drain deciding at this moment saw the promotion ended: undo it,
		// as a replay does (see applyReplays).
		if err := ch.st.SetDrained(dctx, id, false); err != nil {
			return err
		}
	}
	return nil
}

// checkChange validates c against p, and normalizes the queue page's
// setting it brings (a copy: the caller's is left alone).
func (ch *changes) checkChange(p Promotion, c *Change) error {
	if c.Name != nil && len(*c.Name) > 200 {
		return invalid("name", "must be at most 200 characters")
	}
	grant := p.Mode == ModeGrant
	switch {
	case c.Stock != nil && grant:
		return invalid("stock", "a grant promotion's expected target count cannot change")
	case c.Stock != nil && (*c.Stock < 1 || *c.Stock > MaxStock):
		return invalid("stock", "must be between 1 and %d", MaxStock)
	case c.Paused != nil && grant:
		return invalid("paused", "a grant promotion has no claims to pause")
	case c.RevokeReturnsStock != nil && grant:
		return invalid("revoke_returns_stock", "a grant promotion has no stock to return a unit to")
	case c.EndsAt != nil && !c.EndsAt.After(p.StartsAt):
		return invalid("ends_at", "must be after starts_at")
	}
	if c.WaitingRoom == nil {
		return nil
	}
	rc, err := checkRoomChange(p, *c.WaitingRoom)
	c.WaitingRoom = &rc
	return err
}

// checkRoomChange validates a change of p's waiting room's levers: p must
// have a waiting room, each lever its bounds, and a new queue page's
// setting the rules of creation. It returns c with that setting normalized
// (a copy).
func checkRoomChange(p Promotion, c RoomChange) (RoomChange, error) {
	if !p.WaitingRoom.Enabled {
		return c, invalid("waiting_room", "this promotion has no waiting room")
	}
	if c.AdmitPerSecond != nil && (*c.AdmitPerSecond < 1 || *c.AdmitPerSecond > MaxAdmitPerSecond) {
		return c, invalid("waiting_room.admit_per_second", "must be between 1 and %d", MaxAdmitPerSecond)
	}
	if c.Page != nil && c.Page.To != nil {
		pg := *c.Page.To
		pg.Texts = maps.Clone(pg.Texts)
		c.Page = &RoomPageChange{To: &pg}
	}
	w := c.apply(p.WaitingRoom)
	if err := checkLevers(w); err != nil {
		return c, err
	}
	if c.Page != nil {
		return c, normalizePage(&w) // w.Page is c.Page.To
	}
	return c, nil
}
