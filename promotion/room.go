package promotion

import (
	"context"
	"errors"
	"fmt"

	"github.com/dibsio/dibs/waitroom"
)

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
	known := m.known.snapshot()
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
	h := m.known.lookup(id)
	if h == nil || !h.room {
		return 0
	}
	if p := h.promo.Load(); p != nil {
		return p.WaitingRoom.PowDifficulty
	}
	return 0
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
	p, err := load(ctx, m.st, id)
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

// PageOf returns the definition of promotion id for its queue page: from
// the instance's set of undrained promotions when it holds it (no I/O, so
// a crowd loading the page costs the database nothing), else from the
// database. ErrNotFound for an unknown promotion.
func (m *Manager) PageOf(ctx context.Context, id string) (Promotion, error) {
	if h := m.known.lookup(id); h != nil && h.id == id {
		if p := h.promo.Load(); p != nil {
			return fromStore(*p), nil
		}
	}
	return load(ctx, m.st, id)
}
