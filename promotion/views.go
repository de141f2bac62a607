package promotion

import (
	"context"
	"errors"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/store"
)

// Promotion states.
const (
	StateScheduled = "scheduled"
	StateOpen      = "open"
	StateSoldOut   = "sold_out"
	StateEnded     = "ended"
)

// Counts are a promotion's live counts.
type Counts struct {
	Accepted  int64  // claims admitted in Redis (grants: targets enqueued)
	Pending   int64  // accepted − issued − failed
	Issued    int64  // rows confirmed in the database, revoked ones left out
	Revoked   int64  // issued claims an admin revoked
	Failed    int64  // dead-lettered, waiting for replay or void
	Remaining *int64 // stock − accepted; nil for grants
}

// View is a promotion with its live state and counts.
type View struct {
	Promotion
	State  string
	Counts Counts
	// Room counts the promotion's waiting room (zero without one).
	Room RoomCounts
}

// views reads what a request shows of a promotion: its live view (its
// definition with its state and counts, from Redis, the database and its
// waiting room) and, for a retired one, what the database alone holds.
type views struct {
	st    store.Store
	so    *segmentOps
	lc    *loopClient
	rooms *roomOps
	now   func() time.Time // Config.Now
}

// view is p with its live state and counts: from Redis (opening it there
// if it must), the database and its waiting room; a retired one from the
// database alone.
func (vw *views) view(ctx context.Context, p Promotion) (View, error) {
	if p.retired() {
		return vw.retiredView(ctx, p)
	}
	st, err := vw.so.state(ctx, p)
	if errors.Is(err, claim.ErrNotFound) {
		if err = vw.lc.awaitOpen(ctx, p.ID, Promotion{}, false); err == nil {
			st, err = vw.so.state(ctx, p)
		}
	}
	if err != nil {
		return View{}, err
	}
	c, err := vw.st.Counts(ctx, p.ID)
	if err != nil {
		return View{}, err
	}
	v := View{Promotion: p}
	v.Counts.Accepted = st.Accepted()
	v.Counts.Issued = c.Issued - c.Revoked
	v.Counts.Revoked = c.Revoked
	v.Counts.Failed = c.Failed
	// A revoked claim whose unit went back to stock is accepted no more.
	v.Counts.Pending = max(v.Counts.Accepted-(c.Issued-c.RevokedReturned)-c.Failed, 0)
	if p.Mode != ModeGrant {
		r := st.Remaining()
		v.Counts.Remaining = &r
	}
	v.State = vw.stateAt(p, st.Closed, st.Remaining())
	if v.Room, err = vw.rooms.counts(ctx, p); err != nil {
		return View{}, err
	}
	return v, nil
}

// fresh is the view of a promotion just created: nothing accepted yet.
func (vw *views) fresh(p Promotion) View {
	v := View{Promotion: p, State: vw.stateAt(p, false, p.Stock)}
	if p.Mode != ModeGrant {
		r := p.Stock
		v.Counts.Remaining = &r
	}
	return v
}

// stateAt is the state of p given whether Redis shows it closed and the
// stock it shows remaining.
func (vw *views) stateAt(p Promotion, closed bool, remaining int64) string {
	now := vw.now()
	switch {
	case p.ended(now) || closed:
		return StateEnded
	case now.Before(p.StartsAt):
		return StateScheduled
	case p.Mode != ModeGrant && remaining == 0:
		return StateSoldOut
	}
	return StateOpen
}

// retiredView is the view of a retired promotion, from the database alone:
// its state as it was when it drained (ended), its counts from the rows.
func (vw *views) retiredView(ctx context.Context, p Promotion) (View, error) {
	c, err := vw.st.Counts(ctx, p.ID)
	if err != nil {
		return View{}, err
	}
	v := View{Promotion: p, State: StateEnded}
	v.Counts.Issued, v.Counts.Failed = c.Issued, c.Failed
	v.Counts.Accepted = c.Issued + c.Failed
	if p.Mode != ModeGrant {
		r := max(p.Stock-v.Counts.Accepted, 0)
		v.Counts.Remaining = &r
	}
	return v, nil
}

// retiredClaims is a user's claims in a retired promotion, from the
// database: the issued ones.
func (vw *views) retiredClaims(ctx context.Context, id, userID string) ([]UserClaim, error) {
	issued, err := vw.st.ListIssued(ctx, id, userID)
	if err != nil {
		return nil, domainErr(err)
	}
	out := make([]UserClaim, len(issued))
	for i, is := range issued {
		out[i] = UserClaim{ClaimID: is.ClaimID, Rank: is.Rank, Status: StatusIssued, IssuedAt: is.IssuedAt, Grant: is.Grant}
	}
	return out, nil
}

// UserClaim is one of a user's claims.
type UserClaim struct {
	ClaimID  string
	Rank     int64
	Status   string    // StatusPending, StatusIssued, StatusFailed, StatusVoided or StatusRevoked
	IssuedAt time.Time // zero unless issued
	// Grant is what the issued claim received (its code, value and expiry,
	// or its points); zero unless issued.
	Grant store.Grant
}
