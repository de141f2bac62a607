package api

import "time"

// JoinRequest is the body of a join of a waiting room (POST
// /v1/promotions/{id}/queue). UserID is empty with user tokens on (the
// token's user); Challenge and Nonce are a solved proof-of-work challenge,
// for a room that asks for one.
type JoinRequest struct {
	UserID    string `json:"user_id,omitempty"`
	Challenge string `json:"challenge,omitempty"`
	Nonce     string `json:"nonce,omitempty"`
}

// QueueStanding is a user's standing in a waiting room. The pointer
// members are set only where they apply: the position and estimates while
// waiting, the entry token once admitted, the shuffle time in the
// prequeue.
type QueueStanding struct {
	Status                    string     `json:"status"`
	Position                  *int64     `json:"position,omitempty"`
	EstimatedWaitSeconds      *float64   `json:"estimated_wait_seconds,omitempty"`
	EstimatedWaitRangeSeconds []float64  `json:"estimated_wait_range_seconds,omitempty"`
	StockExpectedToLast       *bool      `json:"stock_expected_to_last,omitempty"`
	PollAfterMS               *int64     `json:"poll_after_ms,omitempty"`
	EntryToken                string     `json:"entry_token,omitempty"`
	ExpiresAt                 *time.Time `json:"expires_at,omitempty"`
	ShuffleAt                 *time.Time `json:"shuffle_at,omitempty"`
	// Paused tells waiting, prequeue and admitted users whether the room
	// is paused (an admin paused the promotion's claims, or it is
	// rebuilding): while it is, nobody is let in and no claim is taken, and
	// the estimated wait counts from the resume.
	Paused *bool `json:"paused,omitempty"`
	// Message is the room's message to everyone in line; "" for none.
	Message string `json:"message,omitempty"`
}
