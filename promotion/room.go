package promotion

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/waitroom"
)

// RoomCounts are the counts of a promotion's waiting room.
type RoomCounts struct {
	// Waiting is the places not yet reached by admission.
	Waiting int64
	// Admitted is the passes handed out.
	Admitted int64
	// PassesSpent is the passes spent by claims.
	PassesSpent int64
	// Abandoned is the places skipped because their user stopped checking
	// in.
	Abandoned int64
}

// Rooms returns the waiting rooms the manager opens (Config.Rooms; nil
// without).
func (m *Manager) Rooms() *waitroom.Rooms { return m.cfg.Rooms }

// KnownRooms lists the waiting rooms of the promotions this instance knows
// to be undrained, as its loop last read them from the database (a re-check
// every RecheckInterval, a change made here or hinted by another instance):
// each with the promotion's start and its end (its close, if closed). It is
// the waiting-room scheduler's and collector's list (waitroom.Config.Known):
// so a promotion reopened by a later end, or a room some Redis key no longer
// names, is ticked all the same. Lock-free, no I/O.
func (m *Manager) KnownRooms() []waitroom.Known {
	known := *m.known.Load()
	var out []waitroom.Known
	for id, h := range known {
		if !h.room || h.id != id {
			continue
		}
		p := h.promo.Load()
		if p == nil {
			continue
		}
		ends := p.EndsAt
		if !p.ClosedAt.IsZero() && p.ClosedAt.Before(ends) {
			ends = p.ClosedAt
		}
		out = append(out, waitroom.Known{ID: id, Starts: p.StartsAt, Ends: ends})
	}
	return out
}

// RoomPowDifficulty is the proof-of-work difficulty of promotion id's
// waiting room as this instance knows it (from the definition its loop last
// read, or a change made here), 0 if it asks for none or the promotion is
// not known here. The join path refuses a join without a proof of that
// difficulty before it asks Redis (waitroom.Rooms.JoinWithProof), which
// has the last word. Lock-free, no I/O.
func (m *Manager) RoomPowDifficulty(id string) int {
	h := (*m.known.Load())[id]
	if h == nil || !h.room {
		return 0
	}
	if p := h.promo.Load(); p != nil {
		return p.WaitingRoom.PowDifficulty
	}
	return 0
}

// applyLevers applies a change of the levers of promotion id's waiting
// room to Redis, after the database took it. A room Redis does not hold
// takes the database's values when it is opened; an instance that runs no
// waiting room leaves Redis alone.
func (m *Manager) applyLevers(ctx context.Context, id string, c RoomChange) error {
	if m.cfg.Rooms == nil {
		m.log.WarnContext(ctx, "waiting room changed but this instance runs none: Redis is left as it is", "promotion", id)
		return nil
	}
	l := waitroom.Levers{Message: c.Message, PowDifficulty: c.PowDifficulty}
	if c.AdmitPerSecond != nil {
		v := int64(*c.AdmitPerSecond)
		l.AdmitPerSecond = &v
	}
	if c.MaxActive != nil {
		v := int64(*c.MaxActive)
		l.MaxActive = &v
	}
	err := m.cfg.Rooms.Apply(ctx, id, l)
	if errors.Is(err, waitroom.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("apply the change of the waiting room of %s in Redis (the database holds it: send the change again): %w", id, err)
	}
	return nil
}

// roomSettings are the waitroom settings of p's waiting room: admission
// counts from the promotion's start, and a prequeue collects joins for its
// PrequeueSeconds before.
func roomSettings(p Promotion) waitroom.Settings {
	w := p.WaitingRoom
	s := waitroom.Settings{
		AdmitPerSecond: int64(w.AdmitPerSecond),
		EntryTTL:       time.Duration(w.EntryTTLSeconds) * time.Second,
		AbandonAfter:   time.Duration(w.AbandonAfterSeconds) * time.Second,
		OpensAt:        p.StartsAt,
		MaxActive:      int64(w.MaxActive),
		Message:        w.Message,
		PowDifficulty:  w.PowDifficulty,
	}
	if w.PrequeueSeconds > 0 {
		s.PrequeueFrom = p.StartsAt.Add(-time.Duration(w.PrequeueSeconds) * time.Second)
		s.Seed = w.PrequeueSeed
	}
	return s
}

// Outcomes of Manager.Prequeue, besides ErrNotFound and ErrNotStarted.
var (
	// ErrNoPrequeue means the promotion has no prequeue (no opening
	// moment): its places are in order of joining.
	ErrNoPrequeue = waitroom.ErrNoPrequeue
	// ErrNotShuffled means the promotion has started but its prequeue is
	// not shuffled yet: the room's first tick after the start does it.
	ErrNotShuffled = waitroom.ErrNotShuffled
)

// PrequeueSeedSHA256 returns the hex SHA-256 of the prequeue's seed, the
// commitment shown from creation on; "" without a prequeue.
func (w WaitingRoom) PrequeueSeedSHA256() string {
	if len(w.PrequeueSeed) == 0 {
		return ""
	}
	return waitroom.SeedSHA256(w.PrequeueSeed)
}

// RevealedSeed returns the prequeue's seed once it may be shown: from
// starts_at on by the manager's clock (State is no longer scheduled), or
// once the promotion was closed; nil before, and without a prequeue.
func (v View) RevealedSeed() []byte {
	if v.State == StateScheduled {
		return nil
	}
	return v.WaitingRoom.PrequeueSeed
}

// PrequeueAudit is the record of a promotion's shuffle that lets anyone
// check it: the seed, its hash shown since creation, and the join list in
// the order the shuffle gave places (waitroom.PrequeueOrder recomputes it).
type PrequeueAudit struct {
	// Seed is the revealed seed.
	Seed []byte
	// SeedSHA256 is the hex SHA-256 of Seed.
	SeedSHA256 string
	// Users is a page of the prequeue's users in the order of their
	// places.
	Users []string
	// Total is the users the prequeue collected.
	Total int64
}

// Prequeue returns up to limit users of promotion id's shuffled prequeue
// from offset, with the seed. It answers ErrNotFound for an unknown
// promotion, ErrNoPrequeue for one without a prequeue, ErrNotStarted before
// starts_at (the seed is still secret) and ErrNotShuffled after it until the
// shuffle ran.
func (m *Manager) Prequeue(ctx context.Context, id string, offset, limit int64) (PrequeueAudit, error) {
	p, err := m.load(ctx, id)
	if err != nil {
		return PrequeueAudit{}, err
	}
	w := p.WaitingRoom
	switch {
	case !w.Enabled || w.PrequeueSeconds == 0:
		return PrequeueAudit{}, ErrNoPrequeue
	case m.cfg.Now().Before(p.StartsAt):
		return PrequeueAudit{}, ErrNotStarted
	case m.cfg.Rooms == nil:
		return PrequeueAudit{}, errors.New("this instance runs no waiting room")
	}
	list, err := m.cfg.Rooms.Prequeue(ctx, id, offset, limit)
	if errors.Is(err, waitroom.ErrNotFound) {
		// Redis does not hold the room (yet): nothing shuffled to show.
		return PrequeueAudit{}, ErrNotShuffled
	}
	if err != nil {
		return PrequeueAudit{}, fmt.Errorf("prequeue of %s: %w", id, err)
	}
	return PrequeueAudit{Seed: w.PrequeueSeed, SeedSHA256: w.PrequeueSeedSHA256(),
		Users: list.Users, Total: list.Total}, nil
}

// openRoom opens p's waiting room, if it has one, before its claim state:
// so whenever Redis holds the claim state of a promotion with a room, it
// holds the room too, and the claim script asks for a pass.
func (op *opener) openRoom(ctx context.Context, p Promotion) error {
	if !p.WaitingRoom.Enabled {
		return nil
	}
	if op.m.cfg.Rooms == nil {
		op.m.log.Warn("promotion has a waiting room but this instance runs none: its claims are refused here", "promotion", p.ID)
		return nil
	}
	if _, err := op.m.cfg.Rooms.Open(ctx, p.ID, roomSettings(p)); err != nil {
		return err
	}
	return nil
}

// Why verifyPass found no pass, when no token was looked at. Every claim
// without a token gets one of these, so they are made once.
var (
	errNoToken = errors.New("no entry token")
	errNoRooms = errors.New("this instance runs no waiting room")
)

// verifyPass checks userID's entry token for promotion id: the pass id
// (0 for none) and, when there is none, why.
func (ad *admission) verifyPass(id, userID, token string) (int64, error) {
	if token == "" {
		return 0, errNoToken
	}
	if ad.m.cfg.Rooms == nil {
		return 0, errNoRooms
	}
	p, err := ad.m.cfg.Rooms.Verify(id, userID, token)
	if err != nil {
		return 0, err
	}
	return p.ID, nil
}

// claimPlain is the claim path of a promotion the loop published with no
// waiting room: the plain claim script, with the promotion's fence, in a
// batch with the claims of the promotion queued beside it (unless
// Config.UnbatchedClaims).
func (ad *admission) claimPlain(ctx context.Context, c claimArgs) (Claimed, error) {
	if err := ad.fromMemory(c, false); err != nil {
		return Claimed{}, err
	}
	epoch := ad.m.sold.epoch.Load()
	id, userID, idemKey := c.id, c.userID, c.idemKey
	fence := ad.m.fences.get(id)
	var (
		res claim.Result
		err error
	)
	if b := ad.m.batch; b != nil { // in one call with the claims queued beside it
		res, err = b.Claim(ctx, id, userID, idemKey, fence)
	} else {
		res, err = ad.m.gate.ClaimFenced(ctx, id, userID, idemKey, fence)
	}
	return ad.claimAnswered(ctx, c, res, err, epoch, nil)
}

// claimRoomed is the claim path of a promotion with a waiting room, and of
// one the loop has not published: the claim script that spends a pass,
// which finds out from Redis whether the room exists (a promotion created
// by another instance a moment ago may have one).
func (ad *admission) claimRoomed(ctx context.Context, c claimArgs) (Claimed, error) {
	pass, refused := ad.verifyPass(c.id, c.userID, c.token)
	if err := ad.fromMemory(c, true); err != nil {
		return Claimed{}, err
	}
	epoch := ad.m.sold.epoch.Load()
	id, userID, idemKey := c.id, c.userID, c.idemKey
	fence := ad.m.fences.get(id)
	keys := waitroom.KeysFor(ad.m.cfg.Prefix, id).SpendKeys()
	res, err := ad.m.gate.ClaimRoomed(ctx, id, userID, idemKey, fence, keys, pass)
	return ad.claimAnswered(ctx, c, res, err, epoch, refused)
}

// roomCounts reads the counts of p's waiting room; zero without one, or
// while Redis does not hold it yet.
func (m *Manager) roomCounts(ctx context.Context, p Promotion) (RoomCounts, error) {
	if !p.WaitingRoom.Enabled || m.cfg.Rooms == nil {
		return RoomCounts{}, nil
	}
	c, err := m.cfg.Rooms.Counts(ctx, p.ID)
	if errors.Is(err, waitroom.ErrNotFound) {
		return RoomCounts{}, nil
	}
	if err != nil {
		return RoomCounts{}, fmt.Errorf("waiting room of %s: %w", p.ID, err)
	}
	return RoomCounts{Waiting: c.Waiting, Admitted: c.Admitted, PassesSpent: c.PassesSpent, Abandoned: c.Abandoned}, nil
}
