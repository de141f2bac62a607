package promotion

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
)

// opener makes a promotion's Redis state exist (its meta hash, its
// segments, its waiting room, its code pool's cap), rebuilding
// when the database holds claims Redis lost. Run by the loop, and by a
// request when no loop runs.
type opener struct {
	st     store.Store
	gate   *claim.Gate
	rooms  *roomOps
	fences *fences
	rb     *rebuilder
	log    *slog.Logger
}

// open makes the promotion's Redis state exist. If the database
// holds claims of the promotion and Redis has no meta hash for it, Redis
// lost it: the meta hash is created rebuilding and a rebuild starts.
//
// The rank counter is left as it is: only a rebuild's Resume raises it to
// the database's floor, once the users are restored too. Raised here, it
// would hide a loss from the re-check, which detects one by the counter
// being behind the database.
func (op *opener) open(ctx context.Context, p Promotion) error {
	floors, err := op.st.MaxRanks(ctx, []string{p.ID})
	if err != nil {
		return fmt.Errorf("open promotion %s: %w", p.ID, err)
	}
	return op.openAt(ctx, p, floors[p.ID])
}

// openAt is open with the database's highest rank of the promotion already
// read. On a promotion Redis still holds it refreshes its end and closed
// flag, nothing else.
func (op *opener) openAt(ctx context.Context, p Promotion, floor int64) error {
	if err := op.rooms.open(ctx, p); err != nil {
		return err
	}
	if p.segmented() {
		return op.openSegments(ctx, p, floor)
	}
	// The stock Redis is given is capped by the code pool, read afresh
	// (unknown: 0 until the re-check reads it).
	_ = poolCodes(ctx, op.st, &p)
	floor = op.fences.knownFloor(p.ID, floor)
	if floor == 0 {
		// The database knows no claim of it: there is nothing to rebuild
		// from, and a new promotion must not start rebuilding.
		_, err := op.gate.Open(ctx, p.gate())
		return err
	}
	created, err := op.gate.OpenRebuilding(ctx, p.gate())
	if err != nil {
		return err
	}
	if created {
		op.log.Warn("promotion state is missing in Redis though the database holds its claims: claims wait for the rebuild",
			"promotion", p.ID, "database_max_rank", floor)
		op.rb.startRebuild(p, reasonMissing, true)
	}
	return nil
}

// openSegments makes the Redis state of every segment of p exist. floor is
// the highest rank the database holds: a segment Redis lost is made again
// with no units (claim.Gate.OpenSegments), and that is logged.
func (op *opener) openSegments(ctx context.Context, p Promotion, floor int64) error {
	made, err := op.gate.OpenSegments(ctx, p.gate(), p.layout(), floor)
	if len(made) > 0 && floor > 0 {
		op.log.Warn("segments of the promotion were missing in Redis though the database holds its claims: they were made again with no units; the units they held are not sold",
			"promotion", p.ID, "segments", made, "database_max_rank", floor)
	}
	return err
}
