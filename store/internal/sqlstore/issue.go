package sqlstore

import (
	"fmt"

	"github.com/dibsio/dibs/store"
)

// IssueKey is what makes two issues "the same claim": a redelivery carries
// the same claim id, promotion, user, rank and slot.
type IssueKey struct {
	ClaimID, PromotionID, UserID string
	Rank                         int64
	Slot                         int
}

// KeyOf returns the issue's key.
func KeyOf(is store.Issue) IssueKey {
	return IssueKey{is.ClaimID, is.PromotionID, is.UserID, is.Rank, is.Slot}
}

// ScanIssueKey reads a row of claim_id, promotion_id, user_id, rank and
// slot.
func ScanIssueKey(row Scanner) (IssueKey, error) {
	var k IssueKey
	err := row.Scan(&k.ClaimID, &k.PromotionID, &k.UserID, &k.Rank, &k.Slot)
	return k, err
}

// Outcomes classifies a batch's issues for IssueBatch. The backend inserts
// with ON CONFLICT DO NOTHING RETURNING and hands each returned row to
// Inserted; every issue left is then a Duplicate if the row stored under its
// claim id has the same content, else a Conflict (Settle).
type Outcomes struct {
	issues []store.Issue
	out    []store.Outcome
	// pending maps each distinct content to the indexes carrying it, in
	// batch order: when a batch holds the same claim twice, the first is
	// the one inserted and the second is a duplicate of it.
	pending map[IssueKey][]int
}

// NewOutcomes starts classifying issues, none of them inserted yet.
func NewOutcomes(issues []store.Issue) *Outcomes {
	o := &Outcomes{
		issues:  issues,
		out:     make([]store.Outcome, len(issues)),
		pending: make(map[IssueKey][]int, len(issues)),
	}
	for i, is := range issues {
		k := KeyOf(is)
		o.pending[k] = append(o.pending[k], i)
	}
	return o
}

// Inserted marks the first issue of content k not yet marked as Inserted.
// It fails if the batch holds no such issue: the insert returned a row it
// was not given.
func (o *Outcomes) Inserted(k IssueKey) error {
	idx := o.pending[k]
	if len(idx) == 0 {
		return fmt.Errorf("insert returned claim %s that was not in the batch", k.ClaimID)
	}
	o.out[idx[0]] = store.Inserted
	o.pending[k] = idx[1:]
	return nil
}

// Rest returns the claim ids of the issues not inserted, in batch order:
// the rows Settle needs.
func (o *Outcomes) Rest() []string {
	var rest []string
	for i, out := range o.out {
		if out == 0 {
			rest = append(rest, o.issues[i].ClaimID)
		}
	}
	return rest
}

// Settle classifies every issue not inserted against stored, the rows the
// database holds under their claim ids, and returns the outcomes in batch
// order.
func (o *Outcomes) Settle(stored map[string]IssueKey) []store.Outcome {
	for i, out := range o.out {
		if out != 0 {
			continue
		}
		if k, ok := stored[o.issues[i].ClaimID]; ok && k == KeyOf(o.issues[i]) {
			o.out[i] = store.Duplicate
		} else {
			o.out[i] = store.Conflict
		}
	}
	return o.out
}
