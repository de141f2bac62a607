package sqlstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dibsio/dibs/store"
)

// EncodeFields stores a dead letter's stream entry fields as a JSON object;
// no fields are stored as {}.
func EncodeFields(f map[string]string) (string, error) {
	if len(f) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(f)
	return string(b), err
}

// DecodeFields reads what EncodeFields stored; no fields come back as nil.
func DecodeFields(s string) (map[string]string, error) {
	var f map[string]string
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		return nil, fmt.Errorf("stored fields: %w", err)
	}
	if len(f) == 0 {
		return nil, nil
	}
	return f, nil
}

// CheckTransitionTarget reports an error unless to is a state
// TransitionDeadLetters may move a dead letter to: DeadReplayed or
// DeadVoided.
func CheckTransitionTarget(to string) error {
	if to != store.DeadReplayed && to != store.DeadVoided {
		return fmt.Errorf("target state must be %q or %q, got %q", store.DeadReplayed, store.DeadVoided, to)
	}
	return nil
}

// SortByClaimID orders dead letters by claim id, as TransitionDeadLetters
// returns them (UPDATE ... RETURNING gives rows in no set order).
func SortByClaimID(ds []store.DeadLetter) {
	slices.SortFunc(ds, func(a, b store.DeadLetter) int { return strings.Compare(a.ClaimID, b.ClaimID) })
}

// deadLetterKey returns the dead letter's claim as an [IssueKey], to compare
// with the rows stored under its claim id.
func deadLetterKey(d store.DeadLetter) IssueKey {
	return IssueKey{d.ClaimID, d.PromotionID, d.UserID, d.Rank, d.Slot}
}

// StoredClaimsSQL is the query of the dead letter and the issued row
// stored under one claim id, the parameter p (the backend's placeholder),
// as rows [CheckSameClaim] reads.
func StoredClaimsSQL(p string) string {
	return `SELECT claim_id, promotion_id, user_id, rank, slot FROM dead_letters WHERE claim_id = ` + p + `
		UNION ALL SELECT claim_id, promotion_id, user_id, rank, slot FROM issued WHERE claim_id = ` + p
}

// CheckSameClaim reads rows of [StoredClaimsSQL], the dead letter and issued
// row held under d's claim id, and returns an error wrapping
// store.ErrClaimMismatch if one of them is another claim than d. It does
// not close rows.
func CheckSameClaim(d store.DeadLetter, rows Rows) error {
	stored, err := Collect(rows, ScanIssueKey)
	if err != nil {
		return err
	}
	want := deadLetterKey(d)
	for _, k := range stored {
		if k != want {
			return fmt.Errorf("claim %s stored for promotion %s, user %q, rank %d, slot %d; given promotion %s, user %q, rank %d, slot %d: %w",
				d.ClaimID, k.PromotionID, k.UserID, k.Rank, k.Slot, d.PromotionID, d.UserID, d.Rank, d.Slot, store.ErrClaimMismatch)
		}
	}
	return nil
}
