package stream_test

import (
	"context"
	"errors"
	"log"

	"github.com/dibsio/dibs/stream"
	"github.com/redis/rueidis"
)

// A registry runs one pool per promotion; Run starts it on demand (and
// again after it stopped itself when idle).
func ExampleRegistry() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	reg, err := stream.NewRegistry(client, "web-1", stream.DefaultConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Stop(context.Background())

	issue := stream.PerMessage(func(ctx context.Context, m stream.Message) error {
		claimID, ok := m.Fields["claim_id"]
		if !ok {
			return stream.Malformed(errors.New("missing claim_id"))
		}
		_ = claimID // write the row; a unique key makes a redelivery harmless
		return nil
	})
	ctx := context.Background()
	if err := stream.CreateGroup(ctx, client, "dibs:{promo-1}:claims", "issuers"); err != nil {
		log.Fatal(err)
	}
	if _, err := reg.Run(ctx, "promo-1", stream.Spec{
		Stream: "dibs:{promo-1}:claims", Group: "issuers", Handler: issue,
	}); err != nil {
		log.Fatal(err)
	}
}
