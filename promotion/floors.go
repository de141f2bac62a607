package promotion

import (
	"context"
	"errors"
	"fmt"

	"github.com/dibsio/dibs/claim"
)

// The loop's comparison of Redis with the database, on every re-check:
// the rank floors, which catch a Redis that lost writes (see rebuild.go)
// or a database that lost claims (a halt), and the marks, which catch a
// change Redis does not hold yet (repair).

// checkFloors compares, for every promotion in list, the database's highest
// rank with Redis's rank counter, and starts a rebuild where Redis is
// behind or a promotion is rebuilding with no rebuild running here.
// Promotions Redis lost entirely are opened (rebuilding) and rebuilt, and
// those in refresh (seen for the first time) are opened, with the floors
// read here. It returns the marks it read, one per promotion of list (nil
// if it could not read them).
func (l *loop) checkFloors(ctx context.Context, list []Promotion, refresh map[string]bool) ([]claim.Mark, error) {
	if len(list) == 0 {
		return nil, nil
	}
	ids := make([]string, len(list))
	for i, p := range list {
		ids[i] = p.ID
	}
	// The fences are read before Redis's counters: a rank answered after
	// the counters were read is above them without any loss. Redis's
	// confirmed ranks are read before the database: a rank confirmed after
	// the database was read is in it without any loss.
	known := make([]int64, len(list))
	for i, p := range list {
		known[i] = l.fences.get(p.ID)
	}
	confirmed, err := l.gate.Confirmed(ctx, ids)
	var floors map[string]int64
	if err == nil {
		floors, err = l.st.MaxRanks(ctx, ids)
	}
	var marks []claim.Mark
	if err == nil {
		marks, err = l.gate.Marks(ctx, ids)
	}
	if err != nil {
		// Still open the new ones, one by one.
		errs := []error{fmt.Errorf("check rank floors: %w", err)}
		for _, p := range list {
			if refresh[p.ID] {
				errs = append(errs, l.op.open(ctx, p))
			}
		}
		return nil, errors.Join(errs...)
	}
	var errs []error
	for i, p := range list {
		l.confirmedSeen[p.ID] = confirmed[i]
		l.fences.raise(p.ID, floors[p.ID])
		mk, floor := marks[i], max(floors[p.ID], known[i])
		if refresh[p.ID] || !mk.Exists {
			if err := l.op.openAt(ctx, p, floor); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		switch {
		case p.segmented():
			// Segments are not rebuilt from the database (segments.go).
		case l.rb.busy(p.ID), !mk.Exists:
		case mk.Halted != "":
			// Halted for an operator: only a requested rebuild lifts the halt.
		case mk.Rebuilding:
			// A rebuild runs elsewhere (its counter is raised only when it
			// ends), or its owner died: take over once its hold expires.
			l.rb.startRebuild(p, reasonOrphaned, false)
		case floor > mk.Seq:
			l.log.Warn("Redis lost writes: its rank counter is behind the highest rank known to be taken; claims wait for the rebuild",
				"promotion", p.ID, "redis_seq", mk.Seq, "known_max_rank", floor, "lost_ranks", floor-mk.Seq)
			l.rb.startRebuild(p, reasonBehind, false)
		case confirmed[i] > floors[p.ID]:
			errs = append(errs, l.rb.halt(ctx, p.ID, confirmed[i], floors[p.ID]))
			continue
		}
		if l.cfg.OnHalted != nil && mk.Exists {
			l.cfg.OnHalted(p.ID, mk.Halted != "")
		}
	}
	return marks, errors.Join(errs...)
}

// agree reports whether Redis's marks hold p's stock (capped by its code
// pool), end and pause.
func agree(p Promotion, mk claim.Mark) bool {
	return mk.Stock == p.gateStock() && mk.EndsAt.UnixMilli() == p.EndsAt.UnixMilli() && mk.Paused == p.Paused
}

// repair sets Redis's stock, end and pause of the promotions in list to
// the database's where the marks (read by the same re-check) differ: a
// change that died between its steps, or a definition Redis had from before
// a change. It skips promotions a change holds (ErrChangeBusy), rebuilding
// or halted.
func (l *loop) repair(ctx context.Context, list []Promotion, marks []claim.Mark) error {
	var errs []error
	for i, p := range list {
		if i >= len(marks) {
			break
		}
		mk := marks[i]
		if !mk.Exists || mk.Rebuilding || mk.Halted != "" || l.rb.busy(p.ID) || p.segmented() || p.codes == codesUnknown {
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
		if err := poolCodes(ctx, l.st, &p); err != nil {
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
