package promotion

import (
	"context"
	"errors"
	"fmt"
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

// Create validates p, fills its defaults, stores it and opens it in Redis.
func (m *Manager) Create(ctx context.Context, p Promotion) (View, error) {
	now := m.cfg.Now()
	if err := Normalize(&p, now); err != nil {
		return View{}, err
	}
	if p.WaitingRoom.Enabled && m.cfg.Rooms == nil {
		return View{}, invalid("waiting_room.enabled", "this server runs no waiting room")
	}
	if err := m.kindIssued(p.Kind); err != nil {
		return View{}, err
	}
	if p.ID == "" {
		p.ID = "p-" + randomID(8)
	}
	p.CreatedAt = now.UTC().Truncate(time.Millisecond)
	if err := m.st.CreatePromotion(ctx, p.toStore()); err != nil {
		return View{}, domainErr(err)
	}
	// The database is the truth, and it holds the promotion now: creation
	// is done, whatever Redis answers. The loop opens it in Redis; if it
	// cannot now, the next re-check does as soon as Redis answers, and until
	// then claims get unavailable. Answering an error here would leave the
	// caller to retry a creation that happened.
	if err := m.awaitOpen(ctx, p.ID, p, true); err != nil {
		m.log.WarnContext(ctx, "promotion created; Redis will be prepared by the next re-check", "promotion", p.ID, "err", err)
		return m.fresh(p), nil
	}
	v, err := m.view(ctx, p)
	if err != nil {
		return m.fresh(p), nil
	}
	return v, nil
}

// fresh is the view of a promotion just created: nothing accepted yet.
func (m *Manager) fresh(p Promotion) View {
	v := View{Promotion: p, State: m.stateAt(p, false, p.Stock)}
	if p.Mode != ModeGrant {
		r := p.Stock
		v.Counts.Remaining = &r
	}
	return v
}

// stateAt is the state of p given whether Redis shows it closed and the
// stock it shows remaining.
func (m *Manager) stateAt(p Promotion, closed bool, remaining int64) string {
	now := m.cfg.Now()
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

// Get returns the promotion with its live counts.
func (m *Manager) Get(ctx context.Context, id string) (View, error) {
	p, err := m.load(ctx, id)
	if err != nil {
		return View{}, err
	}
	v, err := m.view(ctx, p)
	return v, domainErr(err)
}

// List returns up to limit promotions with id > after, ordered by id.
func (m *Manager) List(ctx context.Context, after string, limit int) ([]View, error) {
	ps, err := m.st.ListPromotions(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]View, 0, len(ps))
	for _, p := range ps {
		v, err := m.view(ctx, fromStore(p))
		if err != nil {
			return nil, domainErr(err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Close ends the promotion now: later claims get ErrEnded. Redis,
// which decides every claim, is closed first; the database is marked after,
// so a promotion the database shows closed never accepts another claim.
func (m *Manager) Close(ctx context.Context, id string) (View, error) {
	p, err := m.load(ctx, id)
	if err != nil {
		return View{}, err
	}
	if p.retired() {
		return m.rt.retiredView(ctx, p) // ended long ago
	}
	if err := m.so.closeOnGate(ctx, p); errors.Is(err, claim.ErrNotFound) {
		// Redis does not hold it: the loop opens it closed.
		closed := p
		closed.ClosedAt = m.cfg.Now().UTC()
		if err := m.awaitOpen(ctx, id, closed, true); err != nil {
			return View{}, err
		}
	} else if err != nil {
		return View{}, err
	}
	// Instances that remember it sold out answer ended from now on.
	m.ch.tellChanged(ctx, id)
	sp, err := m.st.ClosePromotion(ctx, id, m.cfg.Now().UTC())
	if err != nil {
		return View{}, domainErr(err)
	}
	v, err := m.view(ctx, fromStore(sp))
	return v, domainErr(err)
}

// load reads promotion id's definition from the database.
func (m *Manager) load(ctx context.Context, id string) (Promotion, error) {
	p, err := m.st.GetPromotion(ctx, id)
	return fromStore(p), domainErr(err)
}

func (m *Manager) view(ctx context.Context, p Promotion) (View, error) {
	if p.retired() {
		return m.rt.retiredView(ctx, p)
	}
	st, err := m.so.state(ctx, p)
	if errors.Is(err, claim.ErrNotFound) {
		if err = m.awaitOpen(ctx, p.ID, Promotion{}, false); err == nil {
			st, err = m.so.state(ctx, p)
		}
	}
	if err != nil {
		return View{}, err
	}
	c, err := m.st.Counts(ctx, p.ID)
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
	v.State = m.stateAt(p, st.Closed, st.Remaining())
	if v.Room, err = m.roomCounts(ctx, p); err != nil {
		return View{}, err
	}
	return v, nil
}

// Claim admits one claim of userID in promotion id (see claim.Gate.Claim)
// and makes sure the promotion's confirmation pool runs. idemKey is the
// client's Idempotency-Key or "". Outcomes other than acceptance are this
// package's sentinels; any other error is Redis's (the outcome is then
// unknown if it was a timeout: retry with the same idemKey).
//
// On a promotion with a waiting room every claim gets ErrNotAdmitted: see
// ClaimWithToken.
func (m *Manager) Claim(ctx context.Context, id, userID, idemKey string) (Claimed, error) {
	return m.ClaimWithToken(ctx, id, userID, idemKey, "")
}

// A claim without an Idempotency-Key on a promotion a claim recently
// found sold out or ended may be answered from this instance's memory, with
// no Redis call (see Config.SoldOutMemory).
//
// ClaimWithToken is Claim with the user's entry token of the promotion's
// waiting room ("" for none). On a promotion with a waiting room the token
// must be valid (waitroom.Rooms.Verify) and its pass live and unspent: the
// claim spends it in the step that takes the unit. Otherwise it answers
// ErrNotAdmitted, having taken nothing, except that a retry whose
// Idempotency-Key matched gets its original answer first. On a promotion
// without a waiting room the token is ignored.
func (m *Manager) ClaimWithToken(ctx context.Context, id, userID, idemKey, token string) (Claimed, error) {
	c := claimArgs{id: id, userID: userID, idemKey: idemKey, token: token}
	path := (*admission).claimRoomed // not published here: Redis tells
	if c.h = (*m.known.Load())[id]; c.h != nil {
		path = c.h.claim
	}
	return path(&m.ad, ctx, c)
}

// admission takes claims to their scripts and answers them: the claim
// paths (claimPlain, claimRoomed, claimSegmented) and what they share.
type admission struct{ m *Manager }

// claimArgs is one claim on its way to its script.
type claimArgs struct {
	// h is the promotion's published handle, nil if the loop has not
	// published it.
	h                          *handle
	id, userID, idemKey, token string
	// retried is set once the claim found the promotion missing in Redis
	// and the loop opened it: it is not opened a second time.
	retried bool
}

// claimPath takes one claim to its promotion's script and answers it.
// The loop picks a promotion's path once, when it makes its handle
// (pathOf): claimSegmented, claimPlain (room.go) or claimRoomed (room.go),
// which also takes the claims of promotions not published here.
type claimPath func(ad *admission, ctx context.Context, c claimArgs) (Claimed, error)

// pathOf is the claim path of promotion p's handle.
func pathOf(p Promotion) claimPath {
	switch {
	case p.segmented():
		return (*admission).claimSegmented
	case p.WaitingRoom.Enabled:
		return (*admission).claimRoomed
	default:
		return (*admission).claimPlain
	}
}

// fromMemory answers a claim without an Idempotency-Key on a promotion a
// claim recently found sold out or ended from this instance's memory
// (soldout.go); nil if it must run the script.
func (ad *admission) fromMemory(c claimArgs, room bool) error {
	if c.idemKey != "" {
		return nil
	}
	err := ad.m.sold.remembered(c.id, c.userID, room)
	if err != nil {
		ad.reportRemaining(c.id, Claimed{}, err)
	}
	return err
}

// claimAnswered finishes a claim of a promotion without segments after its
// script answered res, err: an accepted claim raises the fence, wakes the
// pool and is journaled; a failed one is learned by the sold-out memory
// (epoch is the memory's epoch before the script ran), and refused says
// why an entry token was not accepted, if it was not.
func (ad *admission) claimAnswered(ctx context.Context, c claimArgs, res claim.Result, err error, epoch uint64, refused error) (Claimed, error) {
	if err == nil {
		ad.m.fences.raise(c.id, res.Rank)
		ad.m.wk.wakePool(c.id)
		if !res.Replayed {
			ad.m.jr.journalAccepted(c.id, c.userID, c.idemKey, res)
		}
		ad.reportRemaining(c.id, Claimed(res), nil)
		return Claimed(res), nil
	}
	if errors.Is(err, claim.ErrNotFound) && !c.retried {
		return ad.claimMissed(ctx, c)
	}
	ad.gateFailed(c.id, err)
	if errors.Is(err, claim.ErrWrongMode) {
		// A promotion with segments this instance had not published yet.
		if cl, ok, err := ad.claimUnpublished(ctx, c.id, c.userID, c.idemKey); ok {
			return cl, err
		}
	}
	ad.m.sold.learn(c.id, err, epoch)
	if errors.Is(err, claim.ErrNotAdmitted) && refused != nil {
		err = fmt.Errorf("%w: %w", err, refused)
	}
	ad.reportRemaining(c.id, Claimed{}, err)
	return Claimed{}, domainErr(err)
}

// claimMissed takes a claim whose script found no promotion: the loop
// decides (see onGate), and once it opened the promotion the claim runs
// once more, on the path of the handle the loop published for it.
func (ad *admission) claimMissed(ctx context.Context, c claimArgs) (Claimed, error) {
	if err := ad.m.awaitOpen(ctx, c.id, Promotion{}, false); err != nil {
		return Claimed{}, domainErr(err)
	}
	c.retried = true
	path := (*admission).claimRoomed
	if c.h = (*ad.m.known.Load())[c.id]; c.h != nil {
		path = c.h.claim
	}
	return path(ad, ctx, c)
}

// reportRemaining hands Config.OnRemaining the stock a claim's answer
// tells of: an accepted claim's Remaining, none for a sold-out answer. A
// replayed claim, and any other answer, tells nothing. Only for a promotion
// without segments: a segmented claim tells of its segment's stock.
func (ad *admission) reportRemaining(id string, c Claimed, err error) {
	if ad.m.cfg.OnRemaining == nil {
		return
	}
	switch {
	case err == nil && !c.Replayed && c.Remaining >= 0:
		ad.m.cfg.OnRemaining(id, c.Remaining)
	case errors.Is(err, claim.ErrSoldOut):
		ad.m.cfg.OnRemaining(id, 0)
	}
}

// onGate runs a gate call for promotion id. If Redis does not know the
// promotion — an unknown id, one created on another instance a moment ago,
// or one Redis lost — the Manager's loop decides, and this request only
// waits for it (at most Config.OpenWait, else ErrNotReady): an unknown
// promotion is ErrNotFound, a known one is opened (paused for a rebuild if
// the database holds claims of it) and the call runs once more.
func (m *Manager) onGate(ctx context.Context, id string, call func() error) error {
	err := call()
	if errors.Is(err, claim.ErrNotFound) {
		if err := m.awaitOpen(ctx, id, Promotion{}, false); err != nil {
			return err
		}
		err = call()
	}
	m.ad.gateFailed(id, err)
	return err
}

// gateFailed tells the loop what a gate call's error err says of
// promotion id: Redis lost its writes, or a rebuild paused it.
func (ad *admission) gateFailed(id string, err error) {
	if errors.Is(err, claim.ErrLost) {
		ad.m.reportLost(id)
	}
	if errors.Is(err, claim.ErrRebuilding) {
		// Paused by a rebuild, maybe of an instance that died: the next
		// re-check looks at it even if it was idle here, and takes the
		// rebuild over once its hold expires.
		if h := (*ad.m.known.Load())[id]; h != nil && h.quietUntil.Load() != woken {
			h.quietUntil.Store(woken)
		}
	}
}

// Grant enqueues grants for users in a grant promotion; users granted
// before are counted as duplicates and get nothing new.
func (m *Manager) Grant(ctx context.Context, id string, userIDs []string) (Granted, error) {
	var res claim.GrantResult
	err := m.onGate(ctx, id, func() (err error) {
		res, err = m.gate.GrantFenced(ctx, id, userIDs, m.fences.get(id))
		return err
	})
	if err != nil {
		return Granted{}, domainErr(err)
	}
	if res.Enqueued > 0 {
		m.wk.wakePool(id)
	}
	return Granted(res), nil
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

// UserClaims returns the user's claims in the promotion, oldest first.
func (m *Manager) UserClaims(ctx context.Context, id, userID string) ([]UserClaim, error) {
	p, err := m.load(ctx, id)
	if err != nil {
		return nil, err
	}
	if p.retired() {
		return m.rt.retiredClaims(ctx, id, userID)
	}
	segs := p.layout()
	cs, err := m.gate.UserClaims(ctx, segs.Tag(segs.Of(userID)), userID)
	if err != nil {
		return nil, domainErr(err)
	}
	out := make([]UserClaim, len(cs))
	read := false
	for i, c := range cs {
		cid := claim.ClaimID(id, c.Rank)
		if p.Mode == ModeGrant {
			cid = claim.GrantID(id, userID)
		}
		out[i] = UserClaim{ClaimID: cid, Rank: c.Rank, Status: c.Status, IssuedAt: c.IssuedAt}
		read = read || c.Status == claim.StatusPending || c.Status == claim.StatusIssued || c.Status == claim.StatusRevoked
	}
	if read {
		// The database is the truth: a row commits a moment before its
		// acknowledgement marks the claim issued in Redis, and the promotion's
		// counts already show it issued. Answer the same. The grants (codes,
		// points) are only in the database.
		issued, err := m.st.ListIssued(ctx, id, userID)
		if err != nil {
			return nil, domainErr(err)
		}
		for i := range out {
			for _, is := range issued {
				if is.ClaimID != out[i].ClaimID {
					continue
				}
				if out[i].Status == claim.StatusPending || out[i].Status == claim.StatusRevoked ||
					(out[i].Status == claim.StatusIssued && out[i].IssuedAt.IsZero()) {
					// A compact promotion keeps no time of issue in Redis.
					out[i].Status, out[i].IssuedAt = claim.StatusIssued, is.IssuedAt
				}
				if !is.RevokedAt.IsZero() {
					// Revoked: its code is no longer valid, so not shown.
					out[i].Status = claim.StatusRevoked
					continue
				}
				if out[i].Status == claim.StatusIssued {
					out[i].Grant = is.Grant
				}
			}
		}
	}
	return out, nil
}

// Ready checks that Redis and the database answer.
func (m *Manager) Ready(ctx context.Context) error {
	if err := m.client.Do(ctx, m.client.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if err := m.st.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	return nil
}
