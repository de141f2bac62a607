package claim

import (
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// decodeClaim decodes one claim's reply of a claim script (see
// ClaimScriptSource), or one element of the batch claim script's reply.
func decodeClaim(id, userID string, msg *rueidis.RedisMessage) (Result, error) {
	// An outcome is answered by its name alone. An accepted claim's array
	// skips ToString, which would build an error to say it is no string.
	if !msg.IsArray() {
		if status, err := msg.ToString(); err == nil {
			return Result{}, outcome(id, userID, status)
		}
	}
	vals, err := msg.ToArray()
	if err != nil {
		return Result{}, fmt.Errorf("claim %s for %s: %w", id, userID, err)
	}
	if len(vals) == 0 {
		return Result{}, fmt.Errorf("claim %s for %s: empty script reply", id, userID)
	}
	status, err := vals[0].ToString()
	if err != nil {
		return Result{}, fmt.Errorf("claim %s for %s: %w", id, userID, err)
	}
	if status == "not_admitted" {
		reason := "none"
		if len(vals) > 1 {
			reason, _ = vals[1].ToString()
		}
		return Result{}, fmt.Errorf("%w (pass: %s)", ErrNotAdmitted, reason)
	}
	if status != "ok" {
		return Result{}, outcome(id, userID, status)
	}
	if len(vals) < 5 {
		return Result{}, fmt.Errorf("claim %s for %s: short script reply", id, userID)
	}
	var ints [4]int64
	for i := range ints {
		if ints[i], err = vals[i+1].ToInt64(); err != nil {
			return Result{}, fmt.Errorf("claim %s for %s: %w", id, userID, err)
		}
	}
	res := Result{
		ClaimID:   ClaimID(id, ints[0]),
		Rank:      ints[0],
		Replayed:  ints[1] == 1,
		Slot:      int(ints[2]),
		Remaining: ints[3],
	}
	if !res.Replayed {
		if len(vals) < 6 {
			return Result{}, fmt.Errorf("claim %s for %s: short script reply", id, userID)
		}
		at, err := vals[5].ToInt64()
		if err != nil {
			return Result{}, fmt.Errorf("claim %s for %s: %w", id, userID, err)
		}
		res.AcceptedAt = time.UnixMilli(at).UTC()
	}
	return res, nil
}

// outcome is the error of a claim script's outcome other than a claim.
func outcome(id, userID, status string) error {
	if e, ok := outcomes[status]; ok {
		return e
	}
	return fmt.Errorf("claim %s for %s: unexpected outcome %q", id, userID, status)
}
