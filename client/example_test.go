package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/dibsio/dibs/client"
)

// A backend creates a promotion, claims for a user with an Idempotency-Key
// (a retry after a timeout gets the same answer, never a second unit), and
// tells a refusal by its code.
func Example() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", client.WithAdminToken(os.Getenv("DIBS_ADMIN_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.CreatePromotion(ctx, client.NewPromotion{ID: "spring-drop", Stock: 1000}); err != nil && !client.IsProblem(err, client.CodeAlreadyExists) {
		log.Fatal(err)
	}
	got, err := c.Claim(ctx, "spring-drop", "u-123", client.IdempotencyKey("order-17"))
	var p *client.Problem
	switch {
	case err == nil:
		fmt.Println("accepted, rank", got.Rank)
	case errors.As(err, &p) && p.Code == client.CodeSoldOut:
		fmt.Println("sold out")
	case errors.As(err, &p):
		fmt.Println("refused:", p.Code, p.Detail)
	default:
		log.Fatal(err) // no answer: retry with the same key
	}
	for promo, err := range c.Promotions(ctx, client.PromotionFilter{State: client.StateOpen}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(promo.ID, promo.Counts.Accepted, "of", promo.Stock)
	}
}
