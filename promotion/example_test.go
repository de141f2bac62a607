package promotion_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

// A Manager on Redis and an embedded SQLite database: create a promotion,
// take a claim (answered from Redis at once), and see it issued into the
// database by the promotion's confirmation pool a moment later.
func ExampleManager() {
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

	dir, err := os.MkdirTemp("", "dibs-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "dibs.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	issued := make(chan int, 1)
	m, err := promotion.New(client, st, promotion.Config{
		Prefix:   prefix,
		Logger:   slog.New(slog.DiscardHandler),
		OnIssued: func(_ string, n int) { issued <- n },
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Stop(ctx)

	// 100 points to each of the first 10 users; it opens now, for a day.
	v, err := m.Create(ctx, promotion.Promotion{
		ID: "welcome-points", Kind: promotion.KindPoint, Value: 100, Stock: 10,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v.ID, v.State)

	c, err := m.Claim(ctx, "welcome-points", "ada", "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("accepted %s, rank %d, %d left\n", c.ClaimID, c.Rank, c.Remaining)

	select {
	case n := <-issued:
		fmt.Println("issued rows:", n)
	case <-time.After(10 * time.Second):
		log.Fatal("the claim was not issued within 10s")
	}
	claims, err := m.UserClaims(ctx, "welcome-points", "ada")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(claims[0].ClaimID, claims[0].Status, claims[0].Grant.Points, "points")
	// Output:
	// welcome-points open
	// accepted welcome-points#1, rank 1, 9 left
	// issued rows: 1
	// welcome-points#1 issued 100 points
}
