// Package hint lets one dibs instance wake the others at once: an instance
// that has new work for a promotion (claims it just took) publishes a hint on
// the promotion's Redis sharded pub/sub channel, and every instance watching
// it starts its confirmation pool without waiting for its next re-check. A
// [Bus] is the per-process end of it.
//
// Each watched promotion has one channel under its hash tag (the
// promotion package uses claim.Keys.Hints), so on Redis Cluster a hint travels on the shard
// that holds the promotion's keys, and promotions spread their hints across
// shards. A hint carries a [Kind]; new kinds ride on the same channel, and a
// receiver ignores the kinds it does not know.
//
// Hints are only hints: one may be lost (a subscription is being made
// again after a dropped connection, a publish failed), so the receiver's
// periodic re-check stays the guarantee. A [Bus] never blocks on a hint:
// the handler it is given must not block either.
//
// One goroutine (the bus's loop) owns the set of subscriptions; it runs one
// receiving goroutine per watched channel, started and stopped as
// [Bus.Watch] changes the set.
package hint

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/internal/startstop"
)

// Kind is what a hint says about a promotion.
type Kind string

// The kinds of hint.
const (
	// Work says the promotion's stream has new entries: a pool that is
	// not running should start, one that is should read at once.
	Work Kind = "work"
	// Changed says an admin changed the promotion (its stock, end or
	// pause) or gave units back to stock: drop anything cached about it.
	Changed Kind = "changed"
	// SoldOut says a claim of the promotion was just answered sold out:
	// an instance may answer the next claims so from memory for a while.
	// A Changed hint about the promotion drops that memory.
	SoldOut Kind = "soldout"
	// Ended says a claim of the promotion was just answered ended (its
	// window closed, or an admin closed it), to be remembered like SoldOut.
	Ended Kind = "ended"
)

// Hint is one message received on a promotion's channel.
type Hint struct {
	// Key is the watched key (a promotion id) the hint is for.
	Key string
	// Kind is what the hint says. A kind this process does not know is
	// passed on as is; handlers ignore what they do not know.
	Kind Kind
}

// unsubscribeTimeout bounds the SUNSUBSCRIBE of a key no longer watched;
// if it fails, the channel stays subscribed until the connection closes,
// and its hints are ignored.
const unsubscribeTimeout = 2 * time.Second

// DefaultRetryDelay is how long a receiver waits before it subscribes
// again after its subscription failed or was dropped.
const DefaultRetryDelay = time.Second

// Config configures a Bus.
type Config struct {
	// Channel names the channel of a key. Required.
	Channel func(key string) string
	// OnHint is called with every hint received, from the receiving
	// goroutine of its channel; it must not block. Required.
	OnHint func(Hint)
	// RetryDelay is how long a receiver waits before it subscribes again
	// after its subscription failed or was dropped. Defaults to
	// DefaultRetryDelay.
	RetryDelay time.Duration
	// Logger receives the bus's logs; a line about one key names it as
	// promotion (the keys are promotion ids). Defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.RetryDelay == 0 {
		c.RetryDelay = DefaultRetryDelay
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Channel == nil:
		return errors.New("hint: Config.Channel is required")
	case c.OnHint == nil:
		return errors.New("hint: Config.OnHint is required")
	case c.RetryDelay < 0:
		return errors.New("hint: Config.RetryDelay must not be negative")
	}
	return nil
}

// Bus subscribes to the channels of the watched keys and publishes hints.
// Create it with New, then Start it; Publish works without Start.
type Bus struct {
	// Set by New; read-only afterwards.
	client rueidis.Client
	cfg    Config

	life startstop.Base // runs the loop
	// watch carries the newest set of keys to the loop (size 1: a newer
	// set replaces one the loop has not taken yet). Written by Watch, read
	// by the loop.
	watch chan map[string]bool
}

// New returns a bus over client. It subscribes to nothing until Start and
// Watch.
func New(client rueidis.Client, cfg Config) (*Bus, error) {
	if client == nil {
		return nil, errors.New("hint: client is required")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Bus{client: client, cfg: cfg, watch: make(chan map[string]bool, 1)}, nil
}

// Start starts the loop that owns the subscriptions. A second Start fails,
// and so does a Start after Stop.
func (b *Bus) Start() error { return b.life.Start(b.loop) }

// Stop ends every subscription and waits for the receivers until ctx is
// done. Safe to call twice or before Start.
func (b *Bus) Stop(ctx context.Context) error { return b.life.Stop(ctx) }

// Watch sets the keys whose channels the bus subscribes to: new keys are
// subscribed, keys no longer listed are unsubscribed. It never blocks; the
// loop applies the newest set given.
func (b *Bus) Watch(keys []string) {
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	for {
		select {
		case b.watch <- set:
			return
		default:
		}
		select {
		case <-b.watch: // replace the set the loop has not taken yet
		default:
		}
	}
}

// Publish sends a hint of kind about key to every subscribed instance (this
// one included), with one SPUBLISH on the key's shard.
func (b *Bus) Publish(ctx context.Context, key string, kind Kind) error {
	cmd := b.client.B().Spublish().Channel(b.cfg.Channel(key)).Message(string(kind)).Build()
	return b.client.Do(ctx, cmd).Error()
}

// loop owns the set of receivers: one per watched key.
func (b *Bus) loop(stopping <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type receiver struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	recv := make(map[string]receiver)
	defer func() {
		for _, r := range recv {
			r.cancel()
		}
		for _, r := range recv {
			<-r.done
		}
	}()
	for {
		select {
		case <-stopping:
			return
		case set := <-b.watch:
			for key, r := range recv {
				if !set[key] {
					r.cancel()
					<-r.done
					delete(recv, key)
				}
			}
			for key := range set {
				if _, ok := recv[key]; ok {
					continue
				}
				rctx, rcancel := context.WithCancel(ctx)
				r := receiver{cancel: rcancel, done: make(chan struct{})}
				recv[key] = r
				go func() {
					defer close(r.done)
					b.receive(rctx, key)
				}()
			}
		}
	}
}

// receive keeps key's channel subscribed until ctx ends, subscribing again
// RetryDelay after a failure or a dropped connection.
func (b *Bus) receive(ctx context.Context, key string) {
	ch := b.cfg.Channel(key)
	for {
		err := b.client.Receive(ctx, b.client.B().Ssubscribe().Channel(ch).Build(), func(msg rueidis.PubSubMessage) {
			b.cfg.OnHint(Hint{Key: key, Kind: Kind(msg.Message)})
		})
		if ctx.Err() != nil {
			// Receive leaves the channel subscribed when its context ends.
			uctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
			defer cancel()
			_ = b.client.Do(uctx, b.client.B().Sunsubscribe().Channel(ch).Build()).Error()
			return
		}
		if err != nil {
			b.cfg.Logger.Warn("hint subscription dropped; subscribing again", "promotion", key, "channel", ch, "err", err)
		}
		t := time.NewTimer(b.cfg.RetryDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
