package stream

import (
	"context"
	"fmt"
	"time"
)

// Message is one stream entry as handed to a handler.
type Message struct {
	// ID is the stream entry id. It is transport only, never identity: it
	// changes when an entry is re-created, replayed or survives a failover.
	ID string
	// Fields are the entry's field/value pairs. Nil for an entry that was
	// deleted from the stream while it was pending.
	Fields map[string]string
	// Deliveries is how many times Redis has delivered the entry: 1 on first
	// delivery, the count kept by Redis (XPENDING, XCLAIM) on redelivery.
	// It rises with every redelivery, whatever its cause (a restart draining
	// the consumer's own pending entries, a reclaim, a failed handler), so
	// it says nothing about how close the entry is to the dead letters; see
	// Failures.
	Deliveries int64
	// Failures is how many earlier handler calls for the entry failed with
	// an error of no kind (neither transient nor permanent) or panicked:
	// the attempts that count towards Config.MaxDeliveries. The count is
	// kept in Redis (see [FailuresKey]), so it survives restarts and
	// reclaims by other processes; transient failures, restarts and
	// reclaims never raise it. 0 on first delivery.
	Failures int64
}

// Handler handles the entries of one read. It returns one error per message,
// in order: nil means done (the entry is acknowledged), otherwise the error's
// kind decides what happens (see [ErrTransient], [ErrPermanent],
// [ErrMalformed]). A nil slice means every message succeeded.
//
// The context carries the handler deadline (Config.HandlerTimeout); a handler
// that outlives it may see its entries redelivered to another consumer.
// Handlers must be idempotent: an entry can be delivered more than once.
type Handler interface {
	Handle(ctx context.Context, msgs []Message) []error
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(ctx context.Context, msgs []Message) []error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, msgs []Message) []error { return f(ctx, msgs) }

// PerMessage makes a [Handler] that calls fn for each message of a read in
// turn. A panic in fn fails only the message being handled.
func PerMessage(fn func(ctx context.Context, m Message) error) Handler {
	return HandlerFunc(func(ctx context.Context, msgs []Message) []error {
		var errs []error
		for i, m := range msgs {
			if err := callOne(ctx, fn, m); err != nil {
				if errs == nil {
					errs = make([]error, len(msgs))
				}
				errs[i] = err
			}
		}
		return errs
	})
}

func callOne(ctx context.Context, fn func(context.Context, Message) error, m Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v)
		}
	}()
	return fn(ctx, m)
}

// DeadLetter is an entry given up on: written to the dead-letter stream and
// acknowledged.
type DeadLetter struct {
	Message
	// Deliveries is how many handler calls for the entry failed in a way that
	// counts towards dead-lettering, the last one included: MaxDeliveries
	// for an entry that failed that often with errors of no kind,
	// Failures+1 for one that failed permanently or was malformed, and
	// Failures for one deleted from the stream while pending. Transient
	// failures, restarts and reclaims are not counted. It shadows
	// Message.Deliveries, Redis's delivery count, which stays available as
	// d.Message.Deliveries.
	Deliveries int64
	// Reason says why the entry was given up on, e.g. "malformed: missing
	// field claim_id" or "max deliveries (5) reached: ...".
	Reason string
	// At is when the entry was dead-lettered.
	At time.Time
}

// Fields of a dead-letter stream entry written by the runtime, next to the
// original entry's fields.
const (
	DeadLetterFieldID         = "dlq.id"         // the original entry id
	DeadLetterFieldReason     = "dlq.reason"     // DeadLetter.Reason
	DeadLetterFieldDeliveries = "dlq.deliveries" // DeadLetter.Deliveries: counted handler failures
	DeadLetterFieldAt         = "dlq.at"         // DeadLetter.At in unix milliseconds
	// DeadLetterFieldRedisDeliveries is Message.Deliveries: how often Redis
	// delivered the entry, restarts, reclaims and transient retries included.
	DeadLetterFieldRedisDeliveries = "dlq.redis_deliveries"
)

// callHandler runs h with a deadline, turns a panic into a failure of every
// message and checks that there is one result per message.
func callHandler(ctx context.Context, h Handler, timeout time.Duration, msgs []Message) (errs []error) {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			err := panicError(v)
			errs = make([]error, len(msgs))
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	errs = h.Handle(hctx, msgs)
	if errs != nil && len(errs) != len(msgs) {
		err := fmt.Errorf("stream: handler returned %d results for %d messages", len(errs), len(msgs))
		errs = make([]error, len(msgs))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

type consumerKey struct{}

// ConsumerFromContext returns the name of the consumer that handles the
// entries, from a handler's context.
func ConsumerFromContext(ctx context.Context) string {
	s, _ := ctx.Value(consumerKey{}).(string)
	return s
}
