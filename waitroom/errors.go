package waitroom

import (
	"errors"

	"github.com/dibsio/dibs/internal/startstop"
)

// Sentinel outcomes. Callers switch on them with errors.Is. The pass errors
// (ErrForged, ErrExpired, ErrSpent, ErrNotYours, ErrUnknownPass) all answer
// the claim API's not_admitted.
var (
	// ErrNotFound means the promotion has no waiting room in Redis, or its
	// claim state is missing.
	ErrNotFound = errors.New("waitroom: no such waiting room")
	// ErrNotJoined means the user never joined the room.
	ErrNotJoined = errors.New("waitroom: user has not joined")
	// ErrSoldOut means the stock is gone and no live pass may give any back:
	// nobody is let in, so nobody may join.
	ErrSoldOut = errors.New("waitroom: sold out")
	// ErrEnded means the promotion ended or was closed.
	ErrEnded = errors.New("waitroom: promotion ended")
	// ErrForged means an entry token was not made by a key in use: it is
	// malformed, names an unknown key, or its signature does not match.
	ErrForged = errors.New("waitroom: forged entry token")
	// ErrExpired means an entry token's pass expired before it was spent.
	ErrExpired = errors.New("waitroom: entry token expired")
	// ErrSpent means the pass was spent already: a pass lets in once.
	ErrSpent = errors.New("waitroom: entry token already spent")
	// ErrNotYours means a genuine token was presented for another user or
	// another promotion.
	ErrNotYours = errors.New("waitroom: entry token belongs to another user")
	// ErrUnknownPass means a correctly signed token names a pass Redis does
	// not hold (the room was deleted or Redis lost it).
	ErrUnknownPass = errors.New("waitroom: unknown pass")
)

// Lifecycle errors of the Scheduler and the Watcher, the same values as
// stream's and promotion's: every long-running part of dibs answers alike.
var (
	// ErrStarted is returned by a second Scheduler.Start or Watcher.Start.
	ErrStarted = startstop.ErrStarted
	// ErrStopped is returned by Scheduler.Start or Watcher.Start after
	// Stop: a stopped scheduler or watcher is done for good; make a new
	// one to run again.
	ErrStopped = startstop.ErrStopped
)

// outcomes maps the scripts' outcome strings to the sentinels.
var outcomes = map[string]error{
	"not_found":  ErrNotFound,
	"not_joined": ErrNotJoined,
	"sold_out":   ErrSoldOut,
	"ended":      ErrEnded,
	"expired":    ErrExpired,
	"spent":      ErrSpent,
	"not_yours":  ErrNotYours,
	"unknown":    ErrUnknownPass,
}
