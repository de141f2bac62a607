package promotion

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dibsio/dibs/claim"
)

// Create validates p, fills its defaults, stores it and opens it in Redis.
func (m *Manager) Create(ctx context.Context, p Promotion) (View, error) {
	now := m.cfg.Now()
	if err := Normalize(&p, now); err != nil {
		return View{}, err
	}
	if p.WaitingRoom.Enabled && m.cfg.Rooms == nil {
		return View{}, invalid("waiting_room.enabled", "this server runs no waiting room")
	}
	if err := kindIssued(m.cfg.Issuers, p.Kind); err != nil {
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
	if err := m.lc.awaitOpen(ctx, p.ID, p, true); err != nil {
		m.log.WarnContext(ctx, "promotion created; Redis will be prepared by the next re-check", "promotion", p.ID, "err", err)
		return m.vw.fresh(p), nil
	}
	v, err := m.vw.view(ctx, p)
	if err != nil {
		return m.vw.fresh(p), nil
	}
	return v, nil
}

// Get returns the promotion with its live counts.
func (m *Manager) Get(ctx context.Context, id string) (View, error) {
	p, err := load(ctx, m.st, id)
	if err != nil {
		return View{}, err
	}
	v, err := m.vw.view(ctx, p)
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
		v, err := m.vw.view(ctx, fromStore(p))
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
	p, err := load(ctx, m.st, id)
	if err != nil {
		return View{}, err
	}
	if p.retired() {
		return m.vw.retiredView(ctx, p) // ended long ago
	}
	if err := m.so.closeOnGate(ctx, p); errors.Is(err, claim.ErrNotFound) {
		// Redis does not hold it: the loop opens it closed.
		closed := p
		closed.ClosedAt = m.cfg.Now().UTC()
		if err := m.lc.awaitOpen(ctx, id, closed, true); err != nil {
			return View{}, err
		}
	} else if err != nil {
		return View{}, err
	}
	sp, err := m.st.ClosePromotion(ctx, id, m.cfg.Now().UTC())
	// Then every instance is told, this one included: those that remember
	// it sold out answer ended from now on, and the re-check the news
	// causes reads the promotion closed from the database, so it drains
	// now. Told before the database held the close, a re-check could read
	// the promotion still open and leave it quiet, undrained, until its
	// next idle re-check. Told even if the database failed: Redis closed it.
	m.wk.tellChanged(ctx, id)
	if err != nil {
		return View{}, domainErr(err)
	}
	v, err := m.vw.view(ctx, fromStore(sp))
	return v, domainErr(err)
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
	c := claimArgs{h: m.known.lookup(id), id: id, userID: userID, idemKey: idemKey, token: token}
	return route(c)(&m.cl, ctx, c)
}

// Grant enqueues grants for users in a grant promotion; users granted
// before are counted as duplicates and get nothing new.
func (m *Manager) Grant(ctx context.Context, id string, userIDs []string) (Granted, error) {
	var res claim.GrantResult
	err := m.lc.onGate(ctx, id, func() (err error) {
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

// UserClaims returns the user's claims in the promotion, oldest first.
func (m *Manager) UserClaims(ctx context.Context, id, userID string) ([]UserClaim, error) {
	p, err := load(ctx, m.st, id)
	if err != nil {
		return nil, err
	}
	if p.retired() {
		return m.vw.retiredClaims(ctx, id, userID)
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
