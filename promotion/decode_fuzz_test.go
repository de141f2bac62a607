package promotion

import (
	"reflect"
	"strconv"
	"testing"
)

// FuzzDecodeIssue feeds arbitrary stream entries to the decoder of the
// issuer. It never panics; an entry it accepts has a claim id, a valid user
// id, a rank and a slot of at least 1; and the accepted entry encoded again
// decodes to the same Issue.
func FuzzDecodeIssue(f *testing.F) {
	f.Add("spring-drop", "spring-drop#1", "u-123", "1", "1", "1763683200000")
	f.Add("p", "p@u", "u", "42", "3", "0")
	f.Add("p", "", "u", "1", "1", "1")
	f.Add("p", "p#1", "", "1", "1", "1")
	f.Add("p", "p#1", "u", "0", "1", "1")
	f.Add("p", "p#1", "u", "-1", "1", "1")
	f.Add("p", "p#1", "u", "9223372036854775808", "1", "1")
	f.Add("p", "p#1", "u", "1", "0", "1")
	f.Add("p", "p#1", "u", "1", "1", "x")
	f.Add("p", "p#1", "u", "+1", "+1", "-1")
	f.Add("p", "p#1", "_u", "1", "1", "1")
	f.Fuzz(func(t *testing.T, promo, claimID, user, rank, slot, at string) {
		fields := map[string]string{"claim_id": claimID, "user": user, "rank": rank, "slot": slot, "at": at}
		is, err := decodeIssue(promo, fields)
		if err != nil {
			return
		}
		if is.ClaimID == "" || !ValidID(is.UserID) || is.Rank < 1 || is.Slot < 1 || is.PromotionID != promo {
			t.Fatalf("decodeIssue accepted %q as %+v", fields, is)
		}
		again := map[string]string{
			"claim_id": is.ClaimID,
			"user":     is.UserID,
			"rank":     strconv.FormatInt(is.Rank, 10),
			"slot":     strconv.Itoa(is.Slot),
			"at":       strconv.FormatInt(is.AcceptedAt.UnixMilli(), 10),
		}
		is2, err := decodeIssue(promo, again)
		if err != nil {
			t.Fatalf("re-encoded %+v as %q, which does not decode: %v", is, again, err)
		}
		if !reflect.DeepEqual(is2, is) {
			t.Fatalf("round trip of %q: %+v, then %+v", fields, is, is2)
		}
	})
}
