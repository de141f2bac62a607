package hint_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/dibsio/dibs/claim"
	"github.com/dibsio/dibs/internal/hint"
	"github.com/dibsio/dibs/internal/testkit/redistest"
	"github.com/dibsio/dibs/internal/testkit/wait"
)

// TestMain ignores rueidis's delayed topology refresh after the connection
// kills of TestHintSubscriptionComesBack: it sleeps under a second, then ends.
func TestMain(m *testing.M) {
	redistest.Main(m, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

// eachTopology runs f in parallel subtests on a single node and on Redis
// Cluster, with a client and a key prefix of its own.
func eachTopology(t *testing.T, f func(t *testing.T, tp redistest.Topology, client rueidis.Client, prefix string)) {
	t.Parallel()
	for _, tp := range redistest.Topologies(t) {
		t.Run(tp.Name, func(t *testing.T) {
			t.Parallel()
			f(t, tp, tp.Client(t), redistest.Prefix(t))
		})
	}
}

// bus is one instance's bus in a test, and the hints it received.
type bus struct {
	*hint.Bus
	got chan hint.Hint
}

func newBus(t *testing.T, client rueidis.Client, prefix string) bus {
	t.Helper()
	got := make(chan hint.Hint, 16)
	b, err := hint.New(client, hint.Config{
		Channel:    func(id string) string { return claim.KeysFor(prefix, id).Hints() },
		OnHint:     func(h hint.Hint) { got <- h },
		RetryDelay: 20 * time.Millisecond,
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return bus{Bus: b, got: got}
}

// subscribers is how many connections listen on key's channel, asked on
// the channel's shard.
func subscribers(client rueidis.Client, prefix, key string) int64 {
	ch := claim.KeysFor(prefix, key).Hints()
	res, err := client.Do(context.Background(), client.B().PubsubShardnumsub().Channel(ch).Build()).ToArray()
	if err != nil || len(res) != 2 {
		return -1
	}
	n, _ := res[1].AsInt64()
	return n
}

// next returns the next hint b received, failing after a generous deadline.
func (b bus) next(t *testing.T) hint.Hint {
	t.Helper()
	select {
	case h := <-b.got:
		return h
	case <-time.After(30 * time.Second):
		t.Fatal("no hint received")
		return hint.Hint{}
	}
}

// TestHintsReachWatchers: a hint published on one bus reaches every bus
// watching the key (the publisher's own included), carrying its kind, and
// none that does not; unwatching a key ends its subscription. On a single
// node and on Redis Cluster, where the channel lives on the key's shard.
func TestHintsReachWatchers(t *testing.T) {
	eachTopology(t, func(t *testing.T, tp redistest.Topology, client rueidis.Client, prefix string) {
		a, b := newBus(t, client, prefix), newBus(t, tp.Client(t), prefix)
		a.Watch([]string{"p1", "p2"})
		b.Watch([]string{"p1"})
		wait.For(t, 30*time.Second, "both subscribed to p1", func() bool { return subscribers(client, prefix, "p1") == 2 })
		wait.For(t, 30*time.Second, "a subscribed to p2", func() bool { return subscribers(client, prefix, "p2") == 1 })

		if err := a.Publish(context.Background(), "p1", hint.Work); err != nil {
			t.Fatal(err)
		}
		for _, x := range []bus{a, b} {
			if h := x.next(t); h != (hint.Hint{Key: "p1", Kind: hint.Work}) {
				t.Fatalf("got %+v", h)
			}
		}
		if err := b.Publish(context.Background(), "p2", "sold_out"); err != nil {
			t.Fatal(err)
		}
		if h := a.next(t); h != (hint.Hint{Key: "p2", Kind: "sold_out"}) {
			t.Fatalf("got %+v", h)
		}

		a.Watch([]string{"p2"})
		wait.For(t, 30*time.Second, "a unsubscribed from p1", func() bool { return subscribers(client, prefix, "p1") == 1 })
		if err := a.Publish(context.Background(), "p1", hint.Work); err != nil {
			t.Fatal(err)
		}
		if h := b.next(t); h.Key != "p1" {
			t.Fatalf("got %+v", h)
		}
		// A hint to a key a no longer watches would have arrived with
		// b's: published after it, on the same connection order.
		if err := b.Publish(context.Background(), "p2", hint.Work); err != nil {
			t.Fatal(err)
		}
		if h := a.next(t); h.Key != "p2" {
			t.Fatalf("a got %+v after unwatching p1", h)
		}
		if len(b.got) != 0 {
			t.Fatalf("b got a hint for a key it does not watch: %+v", <-b.got)
		}
	})
}

// TestHintSubscriptionComesBack: when Redis drops the subscribing
// connection, the hints published meanwhile are lost (the re-check covers
// them), but the bus subscribes again and receives the next ones.
func TestHintSubscriptionComesBack(t *testing.T) {
	eachTopology(t, func(t *testing.T, tp redistest.Topology, client rueidis.Client, prefix string) {
		sub := tp.Client(t)
		a := newBus(t, sub, prefix)
		a.Watch([]string{"k"})
		wait.For(t, 30*time.Second, "subscribed", func() bool { return subscribers(client, prefix, "k") == 1 })
		// Kill sub's connection on every node, by its id there.
		ctx := context.Background()
		nodes := client.Nodes()
		for addr, n := range sub.Nodes() {
			id, err := n.Do(ctx, n.B().ClientId().Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			k := nodes[addr]
			if err := k.Do(ctx, k.B().ClientKill().Id(id).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		ch := claim.KeysFor(prefix, "k").Hints()
		wait.For(t, 30*time.Second, "subscribed again", func() bool {
			if subscribers(client, prefix, "k") != 1 {
				return false
			}
			// Publish until one gets through: the subscription may
			// come back between a check and a publish.
			_ = client.Do(context.Background(), client.B().Spublish().Channel(ch).Message("work").Build()).Error()
			select {
			case h := <-a.got:
				return h == hint.Hint{Key: "k", Kind: hint.Work}
			default:
				return false
			}
		})
	})
}

// TestHintConfig: a bus needs a client, a channel function and a handler.
func TestHintConfig(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	ch := func(string) string { return "c" }
	on := func(hint.Hint) {}
	for name, tc := range map[string]struct {
		client rueidis.Client
		cfg    hint.Config
	}{
		"no client":      {nil, hint.Config{Channel: ch, OnHint: on}},
		"no channel":     {client, hint.Config{OnHint: on}},
		"no handler":     {client, hint.Config{Channel: ch}},
		"negative retry": {client, hint.Config{Channel: ch, OnHint: on, RetryDelay: -1}},
	} {
		if _, err := hint.New(tc.client, tc.cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	b, err := hint.New(client, hint.Config{Channel: ch, OnHint: on})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
}
