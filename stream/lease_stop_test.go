package stream

import (
	"context"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/redisserver"
	"github.com/dibsio/dibs/internal/redistest"
	"github.com/dibsio/dibs/internal/wait"
)

// TestStopWithRedisDownIsBounded: a Stop without a deadline while Redis is
// down finishes: no lease renewal waits for a Redis that does not answer.
func TestStopWithRedisDownIsBounded(t *testing.T) {
	t.Parallel()
	srv := redistest.Fresh(t, redisserver.Options{AppendFsync: "off"})
	e := setup(t, redistest.Topology{Name: "fresh", Addrs: []string{srv.Addr()}})
	cfg := fastConfig(ReadPoll)
	cfg.LeaseTTL = 600 * time.Millisecond
	clk := newTestClock()
	cfg.Clock = clk
	p, err := NewPool(e.c, "down", Spec{Stream: e.stream, Group: e.group,
		Handler: HandlerFunc(func(context.Context, []Message) []error { return nil })}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the heartbeat's timer", func() bool { return clk.waiting(cfg.LeaseTTL / 3) })
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	// A heartbeat pass runs into the outage, then the pool is stopped.
	clk.Jump(cfg.LeaseTTL / 3)
	clk.Fire()
	go func() { _ = p.Stop(context.Background()) }()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Stop without a deadline hung while Redis was down")
	}
}

// TestCleanStopReleasesEveryLease: after a clean Stop no lease key is left,
// however a heartbeat pass interleaves with the consumers' exits, so a
// restarted process can take its names at once.
func TestCleanStopReleasesEveryLease(t *testing.T) {
	t.Parallel()
	e := setup(t, redistest.Topologies(t)[0])
	cfg := fastConfig(ReadBlock)
	cfg.MinConsumers, cfg.MaxConsumers = 8, 8
	cfg.LeaseTTL = 60 * time.Millisecond
	left := 0
	for round := 0; round < 40; round++ {
		p, err := NewPool(e.c, "clean", Spec{Stream: e.stream, Group: e.group,
			Handler: HandlerFunc(func(context.Context, []Message) []error { return nil })}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		wait.For(t, 5*time.Second, "8 consumers", func() bool { return p.Consumers() == 8 })
		stopPool(t, p)
		for i := 0; i < 8; i++ {
			n, err := e.c.Do(context.Background(), e.c.B().Exists().Key(LeaseKey(e.stream, ConsumerName("clean", i))).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			left += int(n)
		}
	}
	if left != 0 {
		t.Fatalf("%d lease keys left behind after clean stops", left)
	}
}
