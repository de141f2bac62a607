package waitroom_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/waitroom"
)

// A user joins a promotion's waiting room, is let in by the scheduler, and
// the claim spends the pass once.
func ExampleRooms() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	keys, err := waitroom.ParseKeys(os.Getenv("DIBS_WAITROOM_SECRET"))
	if err != nil {
		log.Fatal(err)
	}
	rooms, err := waitroom.New(client, waitroom.Config{Keys: keys})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// The promotion's claim state exists already (claim.Gate.Open).
	if _, err := rooms.Open(ctx, "spring-drop", waitroom.Settings{AdmitPerSecond: 100}); err != nil {
		log.Fatal(err)
	}
	sched := waitroom.NewScheduler(rooms)
	if err := sched.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer sched.Stop(ctx)

	st, err := rooms.Join(ctx, "spring-drop", "u-123")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Status, st.Position, st.Wait.Low, st.Wait.High)

	// Later, polling (which also checks in):
	st, err = rooms.Status(ctx, "spring-drop", "u-123", true)
	if err != nil {
		log.Fatal(err)
	}
	if st.Status == waitroom.StatusAdmitted {
		if _, err := rooms.Spend(ctx, "spring-drop", "u-123", st.Token); err != nil {
			log.Fatal(err) // ErrSpent the second time
		}
	}
}
