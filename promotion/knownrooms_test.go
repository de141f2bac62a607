package promotion_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/waitroom"
)

// TestKnownRooms: the manager lists the promotions with a waiting room it
// holds, with their start and end, from memory; a change of the end made
// here is in the list when Patch returns, and a close ends the entry at
// the close.
func TestKnownRooms(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	var ahead atomic.Int64
	m := roomManager(t, w, &ahead)
	ctx := context.Background()
	start := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	end := start.Add(24 * time.Hour)
	if _, err := m.Create(ctx, promotion.Promotion{ID: "roomed", Stock: 10, StartsAt: start, EndsAt: end,
		WaitingRoom: promotion.WaitingRoom{Enabled: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, promotion.Promotion{ID: "plain", Stock: 10, StartsAt: start, EndsAt: end}); err != nil {
		t.Fatal(err)
	}
	find := func() (waitroom.Known, int) {
		list := m.KnownRooms()
		for _, k := range list {
			if k.ID == "roomed" {
				return k, len(list)
			}
		}
		return waitroom.Known{}, len(list)
	}
	if k, n := find(); n != 1 || !k.Starts.Equal(start) || !k.Ends.Equal(end) {
		t.Fatalf("known rooms: %d, roomed %+v; want only roomed, from %s to %s", n, k, start, end)
	}
	later := end.Add(time.Hour)
	if _, err := m.Patch(ctx, "roomed", promotion.Change{EndsAt: &later}); err != nil {
		t.Fatal(err)
	}
	if k, _ := find(); !k.Ends.Equal(later) {
		t.Fatalf("after moving the end: %+v, want it to end at %s", k, later)
	}
	if _, err := m.Close(ctx, "roomed"); err != nil {
		t.Fatal(err)
	}
	// The close reaches the loop's definition by its next re-check at the
	// latest.
	wait.For(t, 10*time.Second, "the entry to end at the close", func() bool {
		k, _ := find()
		return k.Ends.Before(later)
	})
}
