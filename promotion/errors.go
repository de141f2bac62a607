package promotion

import (
	"errors"
	"fmt"

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
	// ErrRebuilding means the promotion's claims wait while its Redis
	// counters are rebuilt from the database (or it is halted): nothing was taken;
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

// Code pool errors.
var (
	// ErrNoPoolForKind means codes were uploaded for a promotion whose kind
	// takes no code pool: only coupon promotions do.
	ErrNoPoolForKind = errors.New("promotion: only coupon promotions take uploaded codes")
	// ErrPoolAfterStart means the first codes were uploaded for a
	// promotion that has started: its first claims got generated codes, so
	// it cannot start using a pool now. Top-ups of an existing pool are
	// taken until the promotion ends.
	ErrPoolAfterStart = errors.New("promotion: a code pool must be started before the promotion starts")
	// ErrNotEnoughCodes means a change would raise the stock of a
	// promotion with a code pool above the codes in its pool; the error is
	// a *NotEnoughCodesError.
	ErrNotEnoughCodes = errors.New("promotion: not enough codes in the pool for the stock")
)

// NotEnoughCodesError is a refused raise of the stock of a promotion with
// a code pool: the pool holds fewer codes than the stock asked for, and
// nothing was changed. It matches ErrNotEnoughCodes.
type NotEnoughCodesError struct {
	Stock int64 // the stock asked for
	Codes int64 // the codes in the pool, taken or free
}

func (e *NotEnoughCodesError) Error() string {
	return fmt.Sprintf("promotion: stock %d is above the %d codes in the pool; upload more codes first", e.Stock, e.Codes)
}

// Is makes the error match ErrNotEnoughCodes.
func (e *NotEnoughCodesError) Is(target error) bool { return target == ErrNotEnoughCodes }

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

// errRetired answers a claim, grant or open of a retired promotion.
var errRetired = fmt.Errorf("%w: the promotion is retired", ErrEnded)

// ValidationError names the field of a promotion definition that is wrong.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Reason }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
