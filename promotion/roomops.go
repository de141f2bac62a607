package promotion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

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

// roomOps is what the Manager does with its promotions' waiting rooms in
// Redis (package waitroom): open a room beside its promotion's claim
// state, apply a change of its levers, read its counts, verify a claim's
// entry token. Without Config.Rooms the instance runs no waiting room:
// then it opens none, leaves their levers alone and refuses their claims.
type roomOps struct {
	rooms  *waitroom.Rooms // nil without
	prefix string          // Config.Prefix, under which the rooms' keys are
	log    *slog.Logger
}

// open opens p's waiting room, if it has one, before its claim state:
// so whenever Redis holds the claim state of a promotion with a room, it
// holds the room too, and the claim script asks for a pass.
func (ro *roomOps) open(ctx context.Context, p Promotion) error {
	if !p.WaitingRoom.Enabled {
		return nil
	}
	if ro.rooms == nil {
		ro.log.Warn("promotion has a waiting room but this instance runs none: its claims are refused here", "promotion", p.ID)
		return nil
	}
	if _, err := ro.rooms.Open(ctx, p.ID, roomSettings(p)); err != nil {
		return err
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

// applyLevers applies a change l of the levers of promotion id's waiting
// room to Redis, after the database took it. A room Redis does not hold
// takes the database's values when it is opened; an instance that runs no
// waiting room leaves Redis alone.
func (ro *roomOps) applyLevers(ctx context.Context, id string, l waitroom.Levers) error {
	if ro.rooms == nil {
		ro.log.WarnContext(ctx, "waiting room changed but this instance runs none: Redis is left as it is", "promotion", id)
		return nil
	}
	err := ro.rooms.Apply(ctx, id, l)
	if errors.Is(err, waitroom.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("apply the change of the waiting room of %s in Redis (the database holds it: send the change again): %w", id, err)
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
func (ro *roomOps) verifyPass(id, userID, token string) (int64, error) {
	if token == "" {
		return 0, errNoToken
	}
	if ro.rooms == nil {
		return 0, errNoRooms
	}
	p, err := ro.rooms.Verify(id, userID, token)
	if err != nil {
		return 0, err
	}
	return p.ID, nil
}

// spendKeys are the keys of promotion id's waiting room that the claim
// script spending a pass reads.
func (ro *roomOps) spendKeys(id string) []string {
	return waitroom.KeysFor(ro.prefix, id).SpendKeys()
}

// counts reads the counts of p's waiting room; zero without one, or
// while Redis does not hold it yet.
func (ro *roomOps) counts(ctx context.Context, p Promotion) (RoomCounts, error) {
	if !p.WaitingRoom.Enabled || ro.rooms == nil {
		return RoomCounts{}, nil
	}
	c, err := ro.rooms.Counts(ctx, p.ID)
	if errors.Is(err, waitroom.ErrNotFound) {
		return RoomCounts{}, nil
	}
	if err != nil {
		return RoomCounts{}, fmt.Errorf("waiting room of %s: %w", p.ID, err)
	}
	return RoomCounts{Waiting: c.Waiting, Admitted: c.Admitted, PassesSpent: c.PassesSpent, Abandoned: c.Abandoned}, nil
}
