package promotion

import (
	"context"
	"log/slog"
	"testing"

	"github.com/dibsio/dibs/internal/testkit/redistest"
)

// TestLossProbePerMaster: the loss probe keeps one marker per Redis master
// (one on a single server, three on the three-master Cluster), finds
// nothing lost while its markers stay, and finds a loss once they are gone.
func TestLossProbePerMaster(t *testing.T) {
	t.Parallel()
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			c := tp.Client(t)
			ctx := context.Background()
			pr := &probe{client: c, prefix: redistest.Prefix(t), instance: "probe", log: slog.New(slog.DiscardHandler)}
			keys, err := pr.probeKeys(ctx)
			if want := map[string]int{"single": 1, "cluster": 3}[tp.Name]; err != nil || len(keys) != want {
				t.Fatalf("markers %v, %v; want %d", keys, err, want)
			}
			for i := range 3 {
				if pr.probeLoss(ctx) {
					t.Fatalf("probe %d found a loss with every marker in place", i+1)
				}
			}
			if err := c.Do(ctx, c.B().Del().Key(keys[len(keys)-1]).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if !pr.probeLoss(ctx) {
				t.Fatal("a master's marker is gone and the probe found no loss")
			}
			if pr.probeLoss(ctx) {
				t.Fatal("the probe after the loss found another")
			}
		})
	}
}
