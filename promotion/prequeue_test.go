package promotion_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/waitroom"
)

func TestNormalizeWaitingRoomTimes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	room := func(w promotion.WaitingRoom) promotion.Promotion {
		return promotion.Promotion{Stock: 10, StartsAt: now.Add(time.Hour), WaitingRoom: w}
	}
	// The refusals are in TestNormalize's table.
	for name, in := range map[string]promotion.WaitingRoom{
		"abandonment default": {Enabled: true},
		"abandonment 10 s":    {Enabled: true, AbandonAfterSeconds: 10},
		"abandonment 1 h":     {Enabled: true, AbandonAfterSeconds: 3600},
		"prequeue":            {Enabled: true, PrequeueSeconds: 600},
		"prequeue of a day":   {Enabled: true, PrequeueSeconds: 86_400},
	} {
		t.Run(name, func(t *testing.T) {
			p := room(in)
			if err := promotion.Normalize(&p, now); err != nil {
				t.Fatal(err)
			}
			w := p.WaitingRoom
			if in.AbandonAfterSeconds == 0 && w.AbandonAfterSeconds != promotion.DefaultAbandonAfterSecs {
				t.Errorf("abandonment %d, want the default %d", w.AbandonAfterSeconds, promotion.DefaultAbandonAfterSecs)
			}
			if (w.PrequeueSeconds > 0) != (len(w.PrequeueSeed) == promotion.PrequeueSeedLen) {
				t.Errorf("prequeue %d s with a seed of %d bytes", w.PrequeueSeconds, len(w.PrequeueSeed))
			}
			again := p
			if err := promotion.Normalize(&again, now); err != nil || !bytes.Equal(again.WaitingRoom.PrequeueSeed, w.PrequeueSeed) {
				t.Errorf("normalizing again: %v, seed %x, want %x", err, again.WaitingRoom.PrequeueSeed, w.PrequeueSeed)
			}
		})
	}
	t.Run("seeds differ", func(t *testing.T) {
		a, b := room(promotion.WaitingRoom{Enabled: true, PrequeueSeconds: 60}), room(promotion.WaitingRoom{Enabled: true, PrequeueSeconds: 60})
		if promotion.Normalize(&a, now) != nil || promotion.Normalize(&b, now) != nil ||
			bytes.Equal(a.WaitingRoom.PrequeueSeed, b.WaitingRoom.PrequeueSeed) {
			t.Fatalf("two promotions, one seed: %x", a.WaitingRoom.PrequeueSeed)
		}
	})
	t.Run("no prequeue, no seed", func(t *testing.T) {
		p := room(promotion.WaitingRoom{Enabled: true, PrequeueSeed: make([]byte, 32)})
		if err := promotion.Normalize(&p, now); err != nil || p.WaitingRoom.PrequeueSeed != nil {
			t.Fatalf("%v, seed %x; want none", err, p.WaitingRoom.PrequeueSeed)
		}
	})
}

// roomManager starts a manager with waiting rooms in w whose clock runs
// ahead of time.Now by *ahead.
func roomManager(t *testing.T, w world, ahead *atomic.Int64) *promotion.Manager {
	t.Helper()
	rooms, err := waitroom.New(w.client, waitroom.Config{Prefix: w.prefix,
		Keys: []waitroom.Key{{ID: "k1", Secret: bytes.Repeat([]byte{9}, waitroom.MinSecretLen)}}})
	if err != nil {
		t.Fatal(err)
	}
	return w.startManager(t, promotion.Config{Instance: "rooms", Rooms: rooms,
		Now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
}

// TestPrequeueSeed: the promotion shows the seed's hash from its creation
// and the seed itself only from starts_at by the manager's clock; the room
// in Redis gets the promotion's abandonment time and prequeue.
func TestPrequeueSeed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	var ahead atomic.Int64
	m := roomManager(t, w, &ahead)
	ctx := context.Background()
	start := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	v, err := m.Create(ctx, promotion.Promotion{ID: "drop", Stock: 10, StartsAt: start,
		WaitingRoom: promotion.WaitingRoom{Enabled: true, PrequeueSeconds: 600, AbandonAfterSeconds: 30}})
	if err != nil {
		t.Fatal(err)
	}
	seed := v.WaitingRoom.PrequeueSeed
	if len(seed) != promotion.PrequeueSeedLen || v.WaitingRoom.PrequeueSeedSHA256() != waitroom.SeedSHA256(seed) {
		t.Fatalf("created with seed %x, hash %s", seed, v.WaitingRoom.PrequeueSeedSHA256())
	}
	if v.RevealedSeed() != nil {
		t.Fatal("the seed is revealed at creation, an hour before the start")
	}
	got, err := m.Get(ctx, "drop")
	if err != nil || got.RevealedSeed() != nil || got.WaitingRoom.PrequeueSeedSHA256() != waitroom.SeedSHA256(seed) {
		t.Fatalf("read before the start: %+v, %v", got, err)
	}
	if _, err := m.Prequeue(ctx, "drop", 0, 10); !errors.Is(err, promotion.ErrNotStarted) {
		t.Fatalf("audit before the start: %v, want ErrNotStarted", err)
	}
	meta, err := w.client.Do(ctx, w.client.B().Hgetall().Key(waitroom.KeysFor(w.prefix, "drop").Meta()).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	if meta["abandon_ms"] != "30000" || meta["pq"] != "open" ||
		meta["pq_from"] != strconv.FormatInt(start.Add(-10*time.Minute).UnixMilli(), 10) {
		t.Fatalf("room meta %v: want abandon_ms 30000, a prequeue from 10 minutes before the start", meta)
	}

	ahead.Store(int64(time.Hour + time.Second))
	got, err = m.Get(ctx, "drop")
	if err != nil || !bytes.Equal(got.RevealedSeed(), seed) {
		t.Fatalf("read after the start: seed %x, %v; want %x", got.RevealedSeed(), err, seed)
	}
	// Redis's clock has not reached the start: nothing was shuffled.
	if _, err := m.Prequeue(ctx, "drop", 0, 10); !errors.Is(err, promotion.ErrNotShuffled) {
		t.Fatalf("audit before the shuffle: %v, want ErrNotShuffled", err)
	}
	if _, err := m.Prequeue(ctx, "missing", 0, 10); !errors.Is(err, promotion.ErrNotFound) {
		t.Fatalf("audit of an unknown promotion: %v", err)
	}
	create(t, m, promotion.Promotion{ID: "plain", Stock: 10, WaitingRoom: promotion.WaitingRoom{Enabled: true}})
	if _, err := m.Prequeue(ctx, "plain", 0, 10); !errors.Is(err, promotion.ErrNoPrequeue) {
		t.Fatalf("audit of a promotion without a prequeue: %v", err)
	}
}

// TestPrequeueShuffleReproduces: the prequeue shuffle reproduces from the
// revealed seed: the audit's order is PrequeueOrder of the seed and the
// join list.
func TestPrequeueShuffleReproduces(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "cluster", "postgres")
	var ahead atomic.Int64
	m := roomManager(t, w, &ahead)
	ctx := context.Background()
	create(t, m, promotion.Promotion{ID: "soon", Stock: 100, StartsAt: time.Now().Add(500 * time.Millisecond),
		WaitingRoom: promotion.WaitingRoom{Enabled: true, PrequeueSeconds: 60}})
	rooms := m.Rooms()
	var joined []string
	for i := range 25 {
		u := "user-" + strconv.Itoa(i)
		if st, err := rooms.Join(ctx, "soon", u); err != nil || st.Status != waitroom.StatusPrequeue {
			t.Fatalf("join of %s: %+v, %v", u, st, err)
		}
		joined = append(joined, u)
	}
	var audit promotion.PrequeueAudit
	wait.For(t, 10*time.Second, "the shuffle at the start", func() bool {
		if _, err := rooms.Tick(ctx, "soon"); err != nil {
			t.Fatal(err)
		}
		var err error
		audit, err = m.Prequeue(ctx, "soon", 0, 100)
		return err == nil
	})
	v, err := m.Get(ctx, "soon")
	if err != nil || !bytes.Equal(v.RevealedSeed(), audit.Seed) || audit.SeedSHA256 != waitroom.SeedSHA256(audit.Seed) {
		t.Fatalf("audit seed %x (hash %s), promotion %x, %v", audit.Seed, audit.SeedSHA256, v.RevealedSeed(), err)
	}
	if want := waitroom.PrequeueOrder(v.RevealedSeed(), joined); audit.Total != 25 || !slices.Equal(audit.Users, want) {
		t.Fatalf("audit %v (total %d), want %v", audit.Users, audit.Total, want)
	}
	if page, err := m.Prequeue(ctx, "soon", 20, 100); err != nil || !slices.Equal(page.Users, audit.Users[20:]) {
		t.Fatalf("page from 20: %+v, %v", page, err)
	}
}
