package api

import "time"

// DeadLetter is a claim the confirmation gave up on.
type DeadLetter struct {
	ClaimID    string    `json:"claim_id"`
	UserID     string    `json:"user_id"`
	Reason     string    `json:"reason"`
	Deliveries int64     `json:"deliveries"`
	At         time.Time `json:"at"`
}

// DeadLetterPage is one page of a promotion's dead letters.
type DeadLetterPage struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
	NextCursor  *string      `json:"next_cursor"`
}

// ReplayRequest is the body of POST …/dead-letters/replay: either
// ClaimIDs (not empty) or All.
type ReplayRequest struct {
	ClaimIDs []string `json:"claim_ids,omitempty"`
	All      bool     `json:"all,omitempty"`
}

// Replayed is the answer of a replay: how many dead letters were put back
// into the pipeline.
type Replayed struct {
	Replayed int `json:"replayed"`
}

// Voided is the answer of a void: how many dead letters were given up,
// their units back in stock.
type Voided struct {
	Voided int `json:"voided"`
}
