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

// A user's app waits in a promotion's waiting room: it follows the
// standing (an event stream, opened again if cut; polling where the server
// streams none) until the user is let in, then claims with the entry
// token.
func ExampleClient_WatchQueue() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", client.WithUserToken(os.Getenv("DIBS_USER_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.JoinQueue(ctx, "spring-drop", ""); err != nil {
		log.Fatal(err)
	}
	for st, err := range c.WatchQueue(ctx, "spring-drop", "") {
		if err != nil {
			log.Fatal(err) // sold_out, ended…: the wait is over
		}
		switch st.Status {
		case client.QueueWaiting:
			fmt.Println("position", *st.Position, "about", *st.EstimatedWaitSeconds, "s")
		case client.QueueAdmitted:
			got, err := c.Claim(ctx, "spring-drop", "", client.EntryToken(st.EntryToken), client.IdempotencyKey("spring-drop-claim"))
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println("claimed, rank", got.Rank)
		default:
			fmt.Println("no unit:", st.Status) // used, expired, abandoned, sold_out, ended
		}
	}
}
