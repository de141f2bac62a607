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
