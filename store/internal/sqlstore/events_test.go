package sqlstore

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/dibsio/dibs/store"
)

// FuzzClaimDataJSON checks the reflection-free encoding of claim events'
// data against encoding/json: the stored bytes must not change.
func FuzzClaimDataJSON(f *testing.F) {
	f.Add("p#1", "p", "u1", int64(1), 1, "2026-11-21T00:00:00.000001Z", "", int64(0), false, "", int64(0))
	f.Add("p#2", "p", "u<2>&\"\\", int64(-2), -1, "", "2026-11-21T00:00:00Z", int64(-5), true, "bad\u2028\x01", int64(7))
	f.Add("p\xff#3", "p\u00e9", "\t\n", int64(1<<62), 0, "x", "y", int64(1), false, "r", int64(-1))
	f.Fuzz(func(t *testing.T, claim, promo, user string, rank int64, slot int, accepted, issued string,
		points int64, hasCode bool, reason string, deliveries int64) {
		d := claimData{ClaimID: claim, PromotionID: promo, UserID: user, Rank: rank, Slot: slot,
			AcceptedAt: accepted, IssuedAt: issued, Points: points, HasCode: hasCode, Reason: reason,
			Deliveries: deliveries}
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.appendJSON(nil); string(got) != string(want) {
			t.Errorf("appendJSON = %s\nwant          %s", got, want)
		}
	})
}

// BenchmarkIssueEvents builds the events of a batch of 100 issued claims.
func BenchmarkIssueEvents(b *testing.B) {
	at := time.Date(2026, 11, 21, 0, 0, 0, 123456000, time.UTC)
	batch := make([]store.Issue, 100)
	for i := range batch {
		batch[i] = store.Issue{ClaimID: fmt.Sprintf("promo#%d", i+1), PromotionID: "promo",
			UserID: fmt.Sprintf("u%016x", i*7919), Rank: int64(i + 1), Slot: 1, AcceptedAt: at,
			Grant: store.Grant{Code: "CODE"}}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := IssueEvents(batch, at); err != nil {
			b.Fatal(err)
		}
	}
}
