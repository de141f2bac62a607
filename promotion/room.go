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

// roomSettings are the waitroom settings of p's waiting room: admission
// counts from the promotion's start.
func roomSettings(p Promotion) waitroom.Settings {
	return waitroom.Settings{
		AdmitPerSecond: int64(p.WaitingRoom.AdmitPerSecond),
		EntryTTL:       time.Duration(p.WaitingRoom.EntryTTLSeconds) * time.Second,
		OpensAt:        p.StartsAt,
	}
}

// openRoom opens p's waiting room, if it has one, before its claim state:
// so whenever Redis holds the claim state of a promotion with a room, it
// holds the room too, and the claim script asks for a pass.
func (m *Manager) openRoom(ctx context.Context, p Promotion) error {
	if !p.WaitingRoom.Enabled {
		return nil
	}
	if m.cfg.Rooms == nil {
		m.log.Warn("promotion has a waiting room but this instance runs none: its claims are refused here", "promotion", p.ID)
		return nil
	}
	if _, err := m.cfg.Rooms.Open(ctx, p.ID, roomSettings(p)); err != nil {
		return err
	}
	return nil
}

// verifyPass checks userID's entry token for promotion id: the pass id
// (0 for none) and, when there is none, why.
func (m *Manager) verifyPass(id, userID, token string) (int64, error) {
	if token == "" {
		return 0, errors.New("no entry token")
	}
	if m.cfg.Rooms == nil {
		return 0, errors.New("this instance runs no waiting room")
	}
	p, err := m.cfg.Rooms.Verify(id, userID, token)
	if err != nil {
		return 0, err
	}
	return p.ID, nil
}

// claimOnGate runs the claim script of promotion id: the plain one when the
// loop knows the promotion has no waiting room, else the one that spends a
// pass, which finds out from Redis whether the room exists (a promotion
// created by another instance a moment ago may have one).
func (m *Manager) claimOnGate(ctx context.Context, id, userID, idemKey string, pass int64) (claim.Result, error) {
	fence := m.fences.get(id)
	if h := (*m.known.Load())[id]; h != nil && !h.room {
		return m.gate.ClaimFenced(ctx, id, userID, idemKey, fence)
	}
	keys := waitroom.KeysFor(m.cfg.Prefix, id).SpendKeys()
	return m.gate.ClaimRoomed(ctx, id, userID, idemKey, fence, keys, pass)
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
