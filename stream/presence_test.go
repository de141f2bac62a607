package stream

import (
	"context"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// Every live registry counts once, whatever how often it announces itself;
// one that leaves drops out at once, and one that stops announcing drops
// out when its announcement expires.
func TestInstances(t *testing.T) {
	t.Parallel()
	tp := redistest.Topologies(t)[0]
	c := tp.Client(t)
	key := redistest.Prefix(t) + "instances"
	ctx := context.Background()
	a := newRegistry(t, c, "a", fastConfig(ReadPoll))
	b := newRegistry(t, c, "b", fastConfig(ReadPoll))
	count := func(r *Registry, ttl time.Duration, want int) {
		t.Helper()
		n, err := r.Instances(ctx, key, ttl)
		if err != nil || n != want {
			t.Fatalf("Instances = %d, %v; want %d", n, err, want)
		}
	}
	count(a, time.Minute, 1)
	count(a, time.Minute, 1)
	count(b, 50*time.Millisecond, 2)
	// b's announcement expires; a's does not.
	wait.For(t, 5*time.Second, "b's announcement to expire", func() bool {
		n, err := a.Instances(ctx, key, time.Minute)
		return err == nil && n == 1
	})
	count(b, time.Minute, 2)
	if err := b.Leave(ctx, key); err != nil {
		t.Fatal(err)
	}
	count(a, time.Minute, 1)
	if _, err := a.Instances(ctx, "", time.Minute); err == nil {
		t.Fatal("Instances with no key: no error")
	}
	if _, err := a.Instances(ctx, key, 0); err == nil {
		t.Fatal("Instances with no ttl: no error")
	}
}

// Spec.Size sets the consumer count a pool starts with, clamped to
// MinConsumers..MaxConsumers; 0 falls back to ExpectedTotal.
func TestSpecSize(t *testing.T) {
	t.Parallel()
	tp := redistest.Topologies(t)[0]
	for _, tt := range []struct {
		name  string
		size  int
		total int64
		want  int
	}{
		{"size", 3, 0, 3},
		{"clamped to max", 100, 0, 4},
		{"unset falls back to the total", 0, 3 * DefaultExpectedPerConsumer, 3},
		{"negative falls back", -1, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, tp)
			cfg := fastConfig(ReadPoll)
			cfg.MaxConsumers = 4
			r := newRegistry(t, e.c, "i1", cfg)
			spec := e.spec(PerMessage(func(context.Context, Message) error { return nil }))
			spec.ExpectedTotal = tt.total
			spec.Size = func() int { return tt.size }
			if _, err := r.Run(context.Background(), "k", spec); err != nil {
				t.Fatal(err)
			}
			wait.For(t, 5*time.Second, "the pool's consumers", func() bool {
				p := r.Pool("k")
				return p != nil && p.Consumers() == tt.want
			})
		})
	}
}
