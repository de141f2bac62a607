package promotion

import (
	"errors"
	"strconv"
	"time"

	"github.com/dibsio/dibs/stream"
)

// The age of the oldest claim accepted and not yet issued, as each instance
// knows it without asking Redis: its consumers read the work stream in
// order, so the oldest claim not yet issued is (almost always) one that some
// consumer of some instance holds right now. Each consumer reports what it
// holds (Config.OnHandling); the metrics take, per promotion, the oldest of
// the reports that stand, and the largest over the instances is the age.

// Handling is what one consumer of a promotion's confirmation pool holds,
// as the issuer reports it through Config.OnHandling.
type Handling struct {
	// Oldest is the acceptance time (Redis TIME) of the oldest claim the
	// consumer holds; zero when it holds none.
	Oldest time.Time
	// Hold is how long the report stands if no other report of the same
	// consumer follows; 0 is until the next one.
	Hold time.Duration
}

// SettleHold is how long the report of a consumer that issued its batch
// stands (see Handling.Hold): it names the newest claim of the batch, which,
// while a backlog waits, is no later than the oldest claim of the next batch
// the consumer takes a moment later. Without a backlog no batch follows and
// the report lapses: for up to SettleHold the age counts from the last
// claim issued.
const SettleHold = 5 * time.Second

// settled is what a consumer holds once the issuer answered errs for msgs
// (nil: it panicked, and the runtime retries the batch later, like entries
// that failed with an error of no kind).
//
// Entries that failed and not for good are still not issued: those whose
// failure is transient are retried at once by the same consumer after a
// pause, and those that failed otherwise stay pending until a reclaim pass
// takes them, at most reclaimMinIdle later. So the report names the oldest
// of them and stands that long: a consumer that retries reports again
// before then, and if it stopped meanwhile, whoever reclaims the entries
// reports them. With every entry issued, or dead-lettered (a dead letter is
// no longer pending: dibs_dead_letters_unhandled counts it), the report
// names the newest claim of the batch for SettleHold.
func settled(msgs []stream.Message, errs []error, reclaimMinIdle time.Duration) Handling {
	if errs == nil {
		return Handling{Oldest: oldestAccepted(msgs, nil), Hold: reclaimMinIdle}
	}
	if oldest := oldestAccepted(msgs, func(i int) bool {
		return errs[i] != nil && !errors.Is(errs[i], stream.ErrPermanent)
	}); !oldest.IsZero() {
		return Handling{Oldest: oldest, Hold: reclaimMinIdle}
	}
	var newest time.Time
	for _, m := range msgs {
		if at, ok := acceptedAt(m); ok && at.After(newest) {
			newest = at
		}
	}
	return Handling{Oldest: newest, Hold: SettleHold}
}

// oldestAccepted is the earliest acceptance time of the entries of msgs
// that keep selects (all of them if keep is nil); zero if none has one.
func oldestAccepted(msgs []stream.Message, keep func(i int) bool) time.Time {
	var oldest time.Time
	for i, m := range msgs {
		if keep != nil && !keep(i) {
			continue
		}
		if at, ok := acceptedAt(m); ok && (oldest.IsZero() || at.Before(oldest)) {
			oldest = at
		}
	}
	return oldest
}

// acceptedAt reads an entry's acceptance time, its at field (unix ms).
func acceptedAt(m stream.Message) (time.Time, bool) {
	ms, err := strconv.ParseInt(m.Fields["at"], 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}
