// Package events tells other systems what happened — a claim issued, failed
// or voided, a promotion opened, sold out or ended — by POSTing each event
// the database recorded (its outbox, [store.EventLog]) to the configured
// webhook subscribers, signed, at least once.
//
// A [Deliverer] runs one goroutine per configured [Subscriber]. Across
// instances, one at a time delivers for a subscriber: the one holding the
// subscriber's lease in the database (renewed every third of
// Config.LeaseTTL; an instance killed without releasing it is taken over
// once it runs out). The holder reads the feed from the subscriber's cursor
// page by page, POSTs each event on its own, in seq order, and moves the
// cursor only past events the subscriber answered with a 2xx. A failure is
// retried with exponential backoff and jitter, or after the Retry-After the
// subscriber asked for, and holds back that subscriber alone.
//
// Each POST carries the event as its JSON body ([Message]) and the headers
// Dibs-Event-Id (the event's id: the same on every redelivery, so a
// subscriber deduplicates on it), Dibs-Event-Type, and Dibs-Signature:
// t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the
// subscriber's secret> (see [Sign] and [Verify]).
package events
