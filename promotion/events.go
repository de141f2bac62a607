package promotion

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
)

// The promotion events are observed by the Manager's loop, on every
// re-check (every RecheckInterval), and written once per promotion and
// type (their ids come from the promotion id and the type, so instances
// that observe the same change write one event):
//
//   - promotion.opened once the start time has passed;
//   - promotion.sold_out the first time a first-come promotion still open
//     shows no stock remaining in Redis;
//   - promotion.ended once the end time has passed or the promotion was
//     closed, at the latest when the loop finds it drained.
const (
	wroteOpened uint8 = 1 << iota
	wroteSoldOut
	wroteEnded
)

// promotionEvents is the loop's record of the promotion events it wrote:
// owned by the loop goroutine, bounded by the promotions it watches.
type promotionEvents struct {
	st      store.Store
	so      *segmentOps
	now     func() time.Time // Config.Now
	log     *slog.Logger
	written map[string]uint8 // promotion id → the events written
}

func newPromotionEvents(st store.Store, so *segmentOps, now func() time.Time, log *slog.Logger) *promotionEvents {
	return &promotionEvents{st: st, so: so, now: now, log: log, written: map[string]uint8{}}
}

// promotionData is the Data of a promotion event.
type promotionData struct {
	PromotionID string `json:"promotion_id"`
	Name        string `json:"name"`
	Mode        string `json:"mode"`
	Kind        string `json:"kind"`
	Stock       int64  `json:"stock"`
	StartsAt    string `json:"starts_at"`
	EndsAt      string `json:"ends_at"`
	ClosedAt    string `json:"closed_at,omitempty"`
}

// observe writes the promotion events due for the promotions the loop
// watches, and promotion.ended for those it stopped watching (drained).
// A write that fails is tried again on the next call. active is the
// loop's set of undrained promotions, lastDue what its last re-check
// looked at. Loop only.
func (pe *promotionEvents) observe(ctx context.Context, active map[string]Promotion, lastDue map[string]claim.Mark) {
	now := pe.now()
	for id, p := range active {
		w := pe.written[id]
		started := !now.Before(p.StartsAt)
		ended := p.ended(now)
		if started && w&wroteOpened == 0 && pe.write(ctx, p, store.EventPromotionOpened, now) {
			w |= wroteOpened
		}
		if ended && w&wroteEnded == 0 && pe.write(ctx, p, store.EventPromotionEnded, now) {
			w |= wroteEnded
		}
		// Only a promotion the re-check looked at can have sold out since:
		// an idle one took no claim here, and the instance that sold it
		// out writes the event.
		if mk, due := lastDue[id]; due && started && !ended && p.Mode != ModeGrant && w&wroteSoldOut == 0 &&
			pe.soldOut(ctx, p, mk) && pe.write(ctx, p, store.EventPromotionSoldOut, now) {
			w |= wroteSoldOut
		}
		pe.written[id] = w
	}
	for id, w := range pe.written {
		if _, ok := active[id]; ok {
			continue
		}
		if w&wroteEnded == 0 {
			p, err := load(ctx, pe.st, id)
			switch {
			case errors.Is(err, ErrNotFound):
			case err != nil, !pe.write(ctx, p, store.EventPromotionEnded, now):
				continue // tried again next time
			}
		}
		delete(pe.written, id)
	}
}

// soldOut reports whether p, which the last re-check read the marks mk
// of, is sold out and not closed: from the marks when they were read (no
// Redis command), else from its live state.
func (pe *promotionEvents) soldOut(ctx context.Context, p Promotion, mk claim.Mark) bool {
	if mk.Exists && !p.segmented() {
		return !mk.Closed && mk.SoldOut()
	}
	st, err := pe.so.state(ctx, p)
	return err == nil && !st.Closed && st.Remaining() == 0
}

// write writes p's event of type typ at at; true once it is written (now
// or before).
func (pe *promotionEvents) write(ctx context.Context, p Promotion, typ string, at time.Time) bool {
	d := promotionData{PromotionID: p.ID, Name: p.Name, Mode: p.Mode, Kind: p.Kind, Stock: p.Stock,
		StartsAt: p.StartsAt.UTC().Format(time.RFC3339Nano), EndsAt: p.EndsAt.UTC().Format(time.RFC3339Nano)}
	if !p.ClosedAt.IsZero() {
		d.ClosedAt = p.ClosedAt.UTC().Format(time.RFC3339Nano)
	}
	data, err := json.Marshal(d)
	if err != nil {
		return false
	}
	e := store.Event{ID: store.EventID(typ, p.ID), Type: typ, At: at, PromotionID: p.ID, Data: data}
	if _, err := pe.st.AppendPromotionEvent(ctx, e); err != nil {
		if ctx.Err() == nil {
			pe.log.Warn("cannot write a promotion event; the next re-check retries", "promotion", p.ID, "type", typ, "err", err)
		}
		return false
	}
	return true
}
