package promotion

import (
	"errors"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/startstop"
	"github.com/dibsio/dibs/store"
)

// The Manager's error vocabulary: every sentinel a Manager method returns is
// one of these, so callers (the HTTP API among them) switch on this package
// alone. The claim outcomes are the claim package's sentinels under their
// own names here — the same values, so errors.Is matches either — and the
// claim and store packages' "not found", "already exists" and "wrong mode"
// are translated into this package's.
var (
	// ErrNotFound means there is no such promotion.
	ErrNotFound = errors.New("promotion: not found")
	// ErrAlreadyExists means a promotion with that id exists.
	ErrAlreadyExists = errors.New("promotion: already exists")
	// ErrWrongMode means the call does not fit the promotion's mode (a
	// claim on a grant promotion, or a grant on a first-come one).
	ErrWrongMode = errors.New("promotion: wrong mode for this call")
	// ErrNotReady means this instance is still preparing the promotion's
	// Redis state (the Manager's loop is opening it, and did not finish
	// within Config.OpenWait): nothing was taken; retry shortly.
	ErrNotReady = errors.New("promotion: not ready on this instance yet")

	// ErrStarted is returned by a second Manager.Start.
	ErrStarted = startstop.ErrStarted
	// ErrStopped is returned by Manager.Start after Manager.Stop: a stopped
	// Manager is done for good; make a new one.
	ErrStopped = startstop.ErrStopped

	// ErrNotStarted means the promotion's window has not opened yet.
	ErrNotStarted = claim.ErrNotStarted
	// ErrEnded means the promotion's window closed or it was closed.
	ErrEnded = claim.ErrEnded
	// ErrAlreadyClaimed means the user reached the per-user limit.
	ErrAlreadyClaimed = claim.ErrAlreadyClaimed
	// ErrSoldOut means the stock is exhausted.
	ErrSoldOut = claim.ErrSoldOut
	// ErrNotAdmitted means the promotion has a waiting room and the claim
	// carried no valid entry token of the user: none, or one forged,
	// expired, spent or another user's. Nothing was taken.
	ErrNotAdmitted = claim.ErrNotAdmitted
	// ErrVoided means an Idempotency-Key matched an accepted claim that an
	// admin voided since: it holds no unit any more.
	ErrVoided = claim.ErrVoided
	// ErrRebuilding means the promotion is paused (or halted) while its
	// Redis counters are rebuilt from the database: nothing was taken;
	// retry shortly. A claim that found Redis lost writes (claim.ErrLost)
	// matches it too.
	ErrRebuilding = claim.ErrRebuilding
	// ErrPaused means an admin paused the promotion's claims (see
	// Manager.Patch): nothing was taken; retry once it is resumed.
	ErrPaused = claim.ErrPaused
	// ErrHeld is ErrPaused under its first name.
	//
	// Deprecated: use ErrPaused.
	ErrHeld = ErrPaused
	// ErrStockBelowAccepted means a change would set the stock below the
	// claims accepted already: nothing was changed, in Redis or the
	// database.
	ErrStockBelowAccepted = claim.ErrBelowAccepted
	// ErrChangeBusy means another change of the promotion is being
	// applied (see Manager.Patch): nothing was changed; retry shortly.
	ErrChangeBusy = claim.ErrPatchBusy
	// ErrDrained means the promotion ended and every claim of it is
	// settled: its end can no longer move.
	ErrDrained = errors.New("promotion: drained")
	// ErrRebuildBusy means a rebuild of the promotion runs already, in this
	// process or another (see Manager.Rebuild).
	ErrRebuildBusy = claim.ErrRebuildBusy
)

// domainErr translates the claim and store packages' sentinels that have a
// name of their own here; every other error is returned as it is.
func domainErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, claim.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	case errors.Is(err, store.ErrAlreadyExists):
		return ErrAlreadyExists
	case errors.Is(err, claim.ErrWrongMode):
		return ErrWrongMode
	case errors.Is(err, store.ErrRetired):
		return errRetired
	}
	return err
}
