package stream

import (
	"context"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/redistest"
	"github.com/dibsio/dibs/internal/wait"
)

// TestTrickleReadsPerMessage: with 32 consumers and entries arriving one at
// a time, a partial read hands the polling role to one parked consumer, not
// to all of them, so each entry costs a few reads, not one per consumer.
// Fresh server, so INFO commandstats counts this pool's reads only.
func TestTrickleReadsPerMessage(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			srv := redistest.Fresh(t, redisserver.Options{AppendFsync: "off"})
			e := setup(t, redistest.Topology{Name: "fresh", Addrs: []string{srv.Addr()}})
			cfg := fastConfig(mode)
			cfg.MinConsumers, cfg.MaxConsumers = 32, 32
			// Long enough that timed-out polls do not blur the count: the
			// entries, each woken for, drive the reads.
			cfg.Block = 2 * time.Second
			cfg.PollInterval = 2 * time.Second
			rec := newRecorder()
			p := e.start(t, "i1", Spec{Handler: HandlerFunc(func(ctx context.Context, msgs []Message) []error {
				rec.see(ctx, msgs)
				return nil
			})}, cfg)
			trickle := func(from, n int) {
				t.Helper()
				for i := from + 1; i <= from+n; i++ {
					e.add(t, 1)
					p.Wake()
					wait.For(t, 5*time.Second, "the trickle", func() bool { return rec.count() == i })
				}
			}
			// Warm up: every consumer drains its own entries and reads once.
			trickle(0, 2)
			const n = 30
			before := commandCalls(t, e.c, "xreadgroup")
			trickle(2, n)
			reads := commandCalls(t, e.c, "xreadgroup") - before
			perMsg := float64(reads) / n
			t.Logf("%s: %d XREADGROUP for %d entries (%.1f per entry)", mode, reads, n, perMsg)
			if perMsg > 4 {
				t.Fatalf("%.1f reads per entry with 32 consumers, want at most 4", perMsg)
			}
		})
	}
}
