package httpapi_test

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/httpapi"
	"github.com/dibsio/dibs/httpapi/ui"
)

// TestIssueLagFromStream: the dashboard's issue lag is the age of the
// oldest claim not yet settled, as its work stream holds it: the first
// entry not yet delivered, or the first one a consumer holds, by its
// "at" (the entry id's time without one); nothing is read for a promotion
// without pending claims. Whatever watched before: the figure is true
// when the page opens.
func TestIssueLagFromStream(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		c := e.client
		key := claim.KeysFor(e.prefix, "lagp").Stream()
		if err := c.Do(ctx, c.B().XgroupCreate().Key(key).Group(claim.Group).Id("0").Mkstream().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		var ids []string
		for _, ago := range []time.Duration{65 * time.Second, 30 * time.Second, 5 * time.Second} {
			id, err := c.Do(ctx, c.B().Xadd().Key(key).Id("*").FieldValue().FieldValue("claim_id", "lagp#1").
				FieldValue("at", strconv.FormatInt(now.Add(-ago).UnixMilli(), 10)).Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		lag := func(pending int64) float64 {
			ps := []ui.Promotion{{ID: "lagp", Pending: pending}}
			httpapi.IssueLags(e.api, ctx, ps, []int{1}, now)
			return ps[0].IssueLagSeconds
		}
		near := func(got, want float64) bool { return math.Abs(got-want) < 0.002 }
		if got := lag(3); !near(got, 65) {
			t.Fatalf("nothing delivered: lag %v, want 65", got)
		}
		if err := c.Do(ctx, c.B().Xreadgroup().Group(claim.Group, "c1").Count(2).Streams().Key(key).Id(">").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if got := lag(3); !near(got, 65) {
			t.Fatalf("the oldest held by a consumer: lag %v, want 65", got)
		}
		if err := c.Do(ctx, c.B().Xack().Key(key).Group(claim.Group).Id(ids[0]).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if got := lag(2); !near(got, 30) {
			t.Fatalf("the first acknowledged: lag %v, want 30", got)
		}
		if err := c.Do(ctx, c.B().Xack().Key(key).Group(claim.Group).Id(ids[1]).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if got := lag(1); !near(got, 5) {
			t.Fatalf("the next one not yet delivered: lag %v, want 5", got)
		}
		if got := lag(0); got != 0 {
			t.Fatalf("nothing pending: lag %v, want 0", got)
		}
	})
}
