package stream

import (
	"errors"
	"fmt"

	"github.com/dibsio/dibs/internal/startstop"
)

// Error kinds. A handler classifies an error by wrapping it with [Transient],
// [Permanent] or [Malformed]; the runtime tests the kind with [errors.Is].
// An error of no kind is retried until Config.MaxDeliveries, then
// dead-lettered.
var (
	// ErrTransient marks a failure of something the handler depends on (a
	// database or webhook that cannot be reached). The pool pauses with backoff
	// and retries the entry without counting the attempt towards dead letters.
	ErrTransient = errors.New("stream: transient failure")
	// ErrPermanent marks an entry that can never succeed; it is dead-lettered at
	// once.
	ErrPermanent = errors.New("stream: permanent failure")
	// ErrMalformed marks an entry that cannot be decoded (a missing or invalid
	// field). It is a permanent failure: errors.Is(err, ErrPermanent) holds too.
	ErrMalformed = errors.New("stream: malformed entry")
	// ErrPanic wraps a panic recovered from a handler. It is a failure of no
	// kind, so the entry is retried until Config.MaxDeliveries.
	ErrPanic = errors.New("stream: handler panicked")
	// ErrLeaseUnavailable means no consumer name could be leased: other live
	// processes with the same instance name hold them all.
	ErrLeaseUnavailable = errors.New("stream: no consumer name could be leased")
	// ErrStarted is returned by a second Pool.Start.
	ErrStarted = startstop.ErrStarted
	// ErrStopped is returned by Pool.Start after Pool.Stop: a stopped pool
	// is done for good.
	ErrStopped = startstop.ErrStopped
	// ErrShutdown is returned by Registry.Run after Registry.Stop.
	ErrShutdown = errors.New("stream: registry is shut down")
	// ErrResolved is returned by a Spec.OnDeadLetter callback that found the
	// entry's work already done and acknowledged the entry itself: the
	// runtime then writes no dead letter.
	ErrResolved = errors.New("stream: dead letter resolved")
)

// kindError attaches a kind to an error while keeping the original in the
// chain, so errors.Is and errors.As see both.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string {
	if e.err == nil {
		return e.kind.Error()
	}
	return e.err.Error()
}

func (e *kindError) Unwrap() []error {
	if e.err == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.err}
}

// Transient marks err as transient (see [ErrTransient]). A nil err stays nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: ErrTransient, err: err}
}

// Permanent marks err as permanent (see [ErrPermanent]). A nil err stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: ErrPermanent, err: err}
}

// malformedKind is both ErrMalformed and ErrPermanent.
var malformedKind = &kindError{kind: ErrPermanent, err: ErrMalformed}

// Malformed marks err as a malformed entry (see [ErrMalformed]); it is also
// permanent. A nil err stays nil.
func Malformed(err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: malformedKind, err: err}
}

// Failure kinds reported through Hooks.Failure.
const (
	FailureTransient  = "transient"   // the handler returned a transient error
	FailurePermanent  = "permanent"   // the handler returned a permanent error
	FailureMalformed  = "malformed"   // the handler reported a malformed entry
	FailureError      = "error"       // the handler returned an error of no kind
	FailurePanic      = "panic"       // the handler panicked
	FailureRedis      = "redis"       // a Redis command of the runtime failed
	FailureAck        = "ack"         // acknowledging handled entries failed
	FailureDeadLetter = "dead_letter" // writing a dead letter failed
	FailureLease      = "lease"       // a consumer lost its lease
	// FailureLeaseExpired: a consumer's lease was not renewed in time (Redis
	// unreachable, or the process froze); it waits for a renewal before it
	// reads or acknowledges again.
	FailureLeaseExpired = "lease_expired"
)

// failureKind names the kind of a handler error for hooks and logs.
func failureKind(err error) string {
	switch {
	case errors.Is(err, ErrMalformed):
		return FailureMalformed
	case errors.Is(err, ErrPermanent):
		return FailurePermanent
	case errors.Is(err, ErrTransient):
		return FailureTransient
	case errors.Is(err, ErrPanic):
		return FailurePanic
	default:
		return FailureError
	}
}

// panicError turns a recovered value into an error of no kind.
func panicError(v any) error {
	if err, ok := v.(error); ok {
		return fmt.Errorf("%w: %w", ErrPanic, err)
	}
	return fmt.Errorf("%w: %v", ErrPanic, v)
}
