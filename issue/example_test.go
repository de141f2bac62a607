package issue_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/dibsio/dibs/issue"
	"github.com/dibsio/dibs/store"
)

// A custom issuer: coupons whose codes carry the promotion's name and the
// claim's rank, so a cashier can read them, and that are worth double to
// the first ten claimants. It only computes what is stored, like the
// built-in Coupon; the store writes it with the claim's issued row.
func ExampleIssuer() {
	var vip issue.Issuer = issue.IssuerFunc(func(_ context.Context, p store.Promotion, c store.Issue) (issue.Grant, error) {
		value := p.Value
		if c.Rank <= 10 {
			value *= 2
		}
		// The code is the same for every delivery of the claim, and unique
		// since ranks are: no NewCode is needed.
		return issue.Grant{Code: fmt.Sprintf("%s-%06d", strings.ToUpper(p.ID), c.Rank), Value: value}, nil
	})

	// Give the issuer to the promotion manager for its kind, next to the
	// built-in ones (promotion.Config.Issuers).
	kinds, err := issue.Builtin(issue.Config{})
	if err != nil {
		panic(err)
	}
	kinds[store.KindCoupon] = vip

	p := store.Promotion{ID: "summer", Kind: store.KindCoupon, Value: 500}
	for _, rank := range []int64{1, 11} {
		g, _ := kinds[p.Kind].Grant(context.Background(), p, store.Issue{ClaimID: fmt.Sprintf("summer#%d", rank), Rank: rank})
		fmt.Println(g.Code, g.Value)
	}
	// Output:
	// SUMMER-000001 1000
	// SUMMER-000011 500
}
