package promotion

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/hint"
	"github.com/dibsio/dibs/store"
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

// store is c as the database takes it.
func (c *RoomChange) store() *store.WaitingRoomChange {
	if c == nil {
		return nil
	}
	return &store.WaitingRoomChange{AdmitPerSecond: c.AdmitPerSecond, MaxActive: c.MaxActive,
		Message: c.Message, PowDifficulty: c.PowDifficulty, Page: c.Page}
}

// patchLease bounds how long a change holds its promotion in Redis
// between its two steps: a change that died in between is repaired from
// the database by the re-check after it.
const patchLease = 10 * time.Second

// Patch changes a running promotion.
//
// The database is the truth and the re-check repairs Redis from it, so
// the order of the writes makes every crash end with the two agreeing on a
// value that never oversells:
//
// A promotion with a code pool holds min(stock, codes) in Redis (see
// AddCodes): a raise of its stock above the pool's codes is refused
// (a *NotEnoughCodesError, nothing changed).
//
//  1. Redis, one script: the promotion's change lease is taken, and a
//     lowered stock is applied at once, refused (ErrStockBelowAccepted,
//     nothing changed anywhere) if it is below the claims accepted, read
//     from the live rank counter in the same step;
//  2. the database: every field, in one transaction with its
//     promotion.changed event (none if nothing changed);
//  3. Redis, one script: stock (a raise is applied only now, after the
//     database holds it), end and pause are applied and the lease given up.
//
// A crash after 1 leaves Redis's stock at most lower than the database's,
// which the re-check raises back once the lease expired; a crash after 2
// leaves the database ahead, which the re-check applies. So Redis's stock
// is above the database's only between 2 and 3, and the database never
// holds a stock below what Redis accepted. Concurrent changes of one
// promotion wait for each other (ErrChangeBusy) and so do the re-check's
// repairs. The claim scripts read stock, end and pause from Redis on every
// claim, so once Patch returns every instance's next claim sees the change;
// a hint (hint.Changed) tells the other instances to drop anything they
// cached about the promotion.
//
// A grant promotion's name and end may change; its stock (the expected
// target count), its pause and revoke_returns_stock may not (a
// ValidationError naming the field).
func (m *Manager) Patch(ctx context.Context, id string, c Change) (View, error) {
	v, _, err := m.PatchChanged(ctx, id, c)
	return v, err
}

// PatchChanged is Patch that also returns the fields whose value the
// change changed, by the names the promotion.changed event gives them
// (name, stock, ends_at, paused, revoke_returns_stock,
// waiting_room.admit_per_second, waiting_room.max_active,
// waiting_room.message, waiting_room.pow_difficulty, waiting_room.page), in
// that order: none
// for a change that found every value as it was already.
func (m *Manager) PatchChanged(ctx context.Context, id string, c Change) (View, []string, error) {
	sp, err := m.st.GetPromotion(ctx, id)
	if err != nil {
		return View{}, nil, domainErr(err)
	}
	v, sp2, err := m.ch.patch(ctx, sp, c)
	if err != nil {
		return View{}, nil, err
	}
	return v, changedFields(sp, sp2), nil
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

// changes applies a promotion's changes and revokes and tells the other
// instances of them; the loop's sweep finishes revokes left half done.
type changes struct{ m *Manager }

// patch applies c to the promotion sp as Patch describes, and returns it
// as the database holds it after the change.
func (ch *changes) patch(ctx context.Context, sp store.Promotion, c Change) (View, store.Promotion, error) {
	id := sp.ID
	p := fromStore(sp)
	if p.segmented() && (c.Stock != nil || c.EndsAt != nil || c.Paused != nil) {
		return View{}, store.Promotion{}, errSegmented("changing stock, ends_at or paused")
	}
	if err := ch.checkChange(p, &c); err != nil {
		return View{}, store.Promotion{}, err
	}
	// The gate's stock is capped by the code pool (gateStock): a raise
	// above the pool's codes is refused, one that stays under them
	// applies, and a lowered stock still above them leaves the cap.
	if err := ch.m.op.poolCodes(ctx, &p); err != nil {
		return View{}, store.Promotion{}, err
	}
	if c.Stock != nil && p.codes > 0 && *c.Stock > p.codes && *c.Stock > p.Stock {
		return View{}, store.Promotion{}, &NotEnoughCodesError{Stock: *c.Stock, Codes: p.codes}
	}
	if c.EndsAt != nil {
		e := c.EndsAt.UTC().Truncate(time.Microsecond)
		c.EndsAt = &e
		if sp.Drained && !e.Equal(p.EndsAt) {
			return View{}, store.Promotion{}, ErrDrained
		}
	}
	rc := claim.Change{EndsAt: c.EndsAt, Paused: c.Paused, Reopen: p.ClosedAt.IsZero() && !sp.Drained}
	if c.Stock != nil {
		q := p
		q.Stock = *c.Stock
		gs := q.gateStock()
		rc.Stock = &gs
	}
	var pt *claim.Patch
	if c.Stock != nil || c.EndsAt != nil || c.Paused != nil {
		err := ch.m.onGate(ctx, id, func() (err error) {
			pt, _, err = ch.m.gate.BeginPatch(ctx, id, rc, patchLease)
			return err
		})
		if err != nil {
			return View{}, store.Promotion{}, domainErr(err)
		}
	}
	// From here on the change is finished even if the caller goes away.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sideEffectTimeout)
	defer cancel()
	sp2, err := ch.m.st.UpdatePromotion(dctx, id, store.PromotionChange{
		Name: c.Name, Stock: c.Stock, EndsAt: c.EndsAt, Paused: c.Paused, RevokeReturnsStock: c.RevokeReturnsStock,
		WaitingRoom: c.WaitingRoom.store(), At: ch.m.cfg.Now(),
	})
	if err != nil {
		if pt != nil {
			if uerr := pt.Undo(dctx, p.gateStock()); uerr != nil {
				ch.m.log.WarnContext(ctx, "change not written; the re-check sets Redis back from the database", "promotion", id, "err", uerr)
			}
		}
		return View{}, store.Promotion{}, domainErr(err)
	}
	if pt != nil {
		if _, err := pt.Apply(dctx); err != nil {
			// The database holds the change: the re-check applies it once
			// the lease expires. Say so rather than claim it is in effect.
			return View{}, store.Promotion{}, fmt.Errorf("apply change of %s in Redis (the re-check applies it within %s): %w", id, patchLease, err)
		}
	}
	if c.WaitingRoom != nil && c.WaitingRoom.levers() {
		// After the database: a failure here leaves the change to send
		// again, never Redis ahead of the database.
		if err := ch.m.applyLevers(dctx, id, *c.WaitingRoom); err != nil {
			return View{}, store.Promotion{}, err
		}
	}
	if c.EndsAt != nil && rc.Reopen && c.EndsAt.After(ch.m.cfg.Now()) {
		// A drain deciding at this moment saw the promotion ended: undo it,
		// as a replay does (see applyReplays).
		if err := ch.m.st.SetDrained(dctx, id, false); err != nil {
			return View{}, store.Promotion{}, err
		}
	}
	ch.tellChanged(dctx, id)
	// This instance's running pools issue with the changed definition (a
	// new name) before the change is answered; the others' once the hint
	// or their next re-check reaches them.
	ch.m.awaitRefresh(dctx, id)
	v, err := ch.m.view(ctx, fromStore(sp2))
	return v, sp2, domainErr(err)
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

// tellChanged tells every instance, this one included, that promotion id
// changed: each drops what it cached about it (its quiet mark here) and
// re-checks it at the next tick. A lost hint costs at most a quiet
// re-check interval.
func (ch *changes) tellChanged(ctx context.Context, id string) {
	ch.m.wk.hinted(hint.Hint{Key: id, Kind: hint.Changed})
	if ch.m.hints == nil {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, hintTimeout)
	defer cancel()
	if err := ch.m.hints.Publish(hctx, id, hint.Changed); err != nil {
		ch.m.log.WarnContext(ctx, "cannot tell other instances of a changed promotion", "promotion", id, "err", err)
	}
}

// forgetCached drops what this instance cached about promotion id because
// it changed: a quiet promotion becomes ordinary at once, and the sold-out
// memory forgets it. Never blocks.
func (ch *changes) forgetCached(id string) {
	ch.m.sold.forgetSoldOut(id)
	if h := (*ch.m.known.Load())[id]; h != nil {
		h.quietUntil.Store(woken)
		h.codes.Store(0)
	}
}

// agree reports whether Redis's marks hold p's stock (capped by its code
// pool), end and pause.
func agree(p Promotion, mk claim.Mark) bool {
	return mk.Stock == p.gateStock() && mk.EndsAt.UnixMilli() == p.EndsAt.UnixMilli() && mk.Paused == p.Paused
}

// repair sets Redis's stock, end and pause of the promotions in list to
// the database's where the marks (read by the same re-check) differ: a
// change that died between its steps, or a definition Redis had from before
// a change. It skips promotions a change holds (ErrChangeBusy), paused for a
// rebuild or halted.
func (l *loop) repair(ctx context.Context, list []Promotion, marks []claim.Mark) error {
	var errs []error
	for i, p := range list {
		if i >= len(marks) {
			break
		}
		mk := marks[i]
		if !mk.Exists || mk.Rebuilding || mk.Halted != "" || l.m.rb.busy(p.ID) || p.segmented() || p.codes == codesUnknown {
			continue
		}
		if agree(p, mk) {
			continue
		}
		// The list was read before the marks: read the database again,
		// after them, so a change applied in between is not undone (and
		// Repair refuses if one is applied after this read).
		sp, err := l.st.GetPromotion(ctx, p.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// And the code pool, after the database's stock: it only grows.
		p = fromStore(sp)
		if err := l.m.op.poolCodes(ctx, &p); err != nil {
			errs = append(errs, err)
			continue
		}
		if h := l.handles[p.ID]; h != nil && p.codes > 0 {
			h.codes.Store(p.codes + 1)
		}
		if agree(p, mk) {
			continue
		}
		stock, ends, paused := p.gateStock(), p.EndsAt, p.Paused
		_, err = l.gate.Repair(ctx, p.ID, mk.Changes, claim.Change{Stock: &stock, EndsAt: &ends, Paused: &paused,
			Reopen: p.ClosedAt.IsZero() && !sp.Drained})
		switch {
		case errors.Is(err, claim.ErrPatchBusy), errors.Is(err, claim.ErrNotFound):
		case errors.Is(err, claim.ErrBelowAccepted):
			l.log.Warn("the database's stock is below the claims Redis accepted; Redis keeps its own",
				"promotion", p.ID, "stock", p.Stock, "redis_stock", mk.Stock)
		case err != nil:
			errs = append(errs, err)
		default:
			l.log.Info("promotion's Redis state set from the database", "promotion", p.ID,
				"stock", stock, "ends_at", p.EndsAt, "paused", p.Paused)
		}
	}
	return errors.Join(errs...)
}
