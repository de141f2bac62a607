package claim_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// A promotion of two units, one per user: the gate ranks the first two
// claims in arrival order, answers a retry with the same Idempotency-Key
// with its original answer, and turns everyone after the stock away.
func ExampleGate() {
	// The tests' own redis-server; an application gives its Redis address.
	addr, prefix, err := redistest.ForExample()
	if err != nil {
		log.Fatal(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	gate, err := claim.New(client, claim.Config{Prefix: prefix})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// Create the promotion's claim state in Redis: its counters, its work
	// stream and the stream's consumer group.
	if _, err := gate.Open(ctx, claim.Promotion{
		ID:           "spring-drop",
		Stock:        2,
		PerUserLimit: 1,
		StartsAt:     time.Now().Add(-time.Minute),
		EndsAt:       time.Now().Add(time.Hour),
	}); err != nil {
		log.Fatal(err)
	}

	for _, user := range []string{"ada", "bob"} {
		res, err := gate.Claim(ctx, "spring-drop", user, "key-"+user)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: rank %d, claim %s, %d left\n", user, res.Rank, res.ClaimID, res.Remaining)
	}

	// A retry of ada's request (a timeout, say) takes no second unit.
	res, err := gate.Claim(ctx, "spring-drop", "ada", "key-ada")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ada again: rank %d, replayed %v\n", res.Rank, res.Replayed)

	_, err = gate.Claim(ctx, "spring-drop", "cy", "")
	fmt.Println("cy:", errors.Is(err, claim.ErrSoldOut), err)

	st, err := gate.State(ctx, "spring-drop")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("accepted %d of %d\n", st.Accepted(), st.Stock)
	// Output:
	// ada: rank 1, claim spring-drop#1, 1 left
	// bob: rank 2, claim spring-drop#2, 0 left
	// ada again: rank 1, replayed true
	// cy: true claim: sold out
	// accepted 2 of 2
}
