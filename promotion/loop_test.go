package promotion_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/promotion"
	"github.com/dibsio/dibs/store"
)

// startManager starts a manager in w with cfg (its prefix and logger filled
// in, and its stream unless set), stopped at cleanup.
func (w world) startManager(t testing.TB, cfg promotion.Config) *promotion.Manager {
	t.Helper()
	cfg.Prefix, cfg.Logger = w.prefix, slog.New(slog.DiscardHandler)
	if cfg.Stream.BatchSize == 0 {
		cfg.Stream = fastStream()
	}
	if cfg.RecheckInterval == 0 {
		cfg.RecheckInterval = 50 * time.Millisecond
	}
	m, err := promotion.New(w.client, w.st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Stop(ctx); err != nil {
			t.Errorf("stop %s: %v", cfg.Instance, err)
		}
	})
	return m
}

// storeOnly writes promotion id to the database alone, as an instance
// that created it a moment ago and has not prepared Redis yet would leave it.
func storeOnly(t *testing.T, w world, id string) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	if err := w.st.CreatePromotion(context.Background(), store.Promotion{ID: id, Mode: store.ModeFirstCome,
		Kind: store.KindCoupon, Stock: 10, PerUserLimit: 1, StartsAt: now.Add(-time.Minute),
		EndsAt: now.Add(time.Hour), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
}

// TestClaimOnPromotionCreatedElsewhere: a claim on a promotion another
// instance created a moment ago is accepted and issued by this instance,
// whether Redis holds the promotion already (this instance's loop has not
// seen it yet) or not at all (the loop opens it while the claim waits). A
// claim on an id nobody created is not found.
func TestClaimOnPromotionCreatedElsewhere(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	// Re-checks far apart, so only the claim's own request can have the
	// promotion opened and its pool started in time.
	b := w.startManager(t, promotion.Config{Instance: "b", RecheckInterval: time.Hour})
	ctx := context.Background()

	t.Run("open in Redis", func(t *testing.T) {
		a := w.startManager(t, promotion.Config{Instance: "a", RecheckInterval: time.Hour})
		create(t, a, promotion.Promotion{ID: "elsewhere", Stock: 10})
		if _, err := b.Claim(ctx, "elsewhere", "u1", ""); err != nil {
			t.Fatalf("claim: %v", err)
		}
		waitCounts(t, b, "elsewhere", 1, 0)
	})
	t.Run("database only", func(t *testing.T) {
		storeOnly(t, w, "unopened")
		if _, err := b.Claim(ctx, "unopened", "u1", ""); err != nil {
			t.Fatalf("claim: %v", err)
		}
		waitCounts(t, b, "unopened", 1, 0)
	})
	t.Run("unknown", func(t *testing.T) {
		if _, err := b.Claim(ctx, "nobody-made-it", "u1", ""); !errors.Is(err, promotion.ErrNotFound) {
			t.Fatalf("claim: %v, want ErrNotFound", err)
		}
	})
}

// TestClaimWhileOpenIsSlow: a claim on a promotion Redis does not know,
// while the database does not answer, is answered ErrNotReady within
// Config.OpenWait: the request only waits for the Manager's loop, which
// runs the lookup, and never runs a query itself. Once the database
// answers, the claim is accepted.
func TestClaimWhileOpenIsSlow(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "postgres")
	const openWait = 200 * time.Millisecond
	// Re-checks far apart, so only the claim asks for the promotion.
	m := w.startManager(t, promotion.Config{Instance: "slow", OpenWait: openWait, RecheckInterval: time.Hour})
	storeOnly(t, w, "blocked")

	// Another session holds the promotions table exclusively: every query
	// that reads it waits.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE promotions IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			if err := tx.Rollback(ctx); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(release)

	start := time.Now()
	_, err = m.Claim(ctx, "blocked", "u1", "")
	took := time.Since(start)
	if !errors.Is(err, promotion.ErrNotReady) {
		t.Fatalf("claim while the database is blocked: %v, want ErrNotReady", err)
	}
	if took > openWait+time.Second {
		t.Fatalf("claim answered after %v; want about %v", took, openWait)
	}

	release()
	wait.NoError(t, 30*time.Second, "the claim once the database answers", func() error {
		_, err := m.Claim(ctx, "blocked", "u1", "")
		return err
	})
	waitCounts(t, m, "blocked", 1, 0)
}

// TestManagerLifecycle: a Manager answers Start and Stop like every other
// long-running part: a second Start fails with ErrStarted, Stop is safe
// twice, a Start after Stop fails with ErrStopped, and a Manager stopped
// before it started never starts.
func TestManagerLifecycle(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "single", "sqlite")
	ctx := context.Background()
	mk := func() *promotion.Manager {
		m, err := promotion.New(w.client, w.st, promotion.Config{
			Prefix: w.prefix, Instance: "life", Stream: fastStream(), Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	m := mk()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); !errors.Is(err, promotion.ErrStarted) {
		t.Fatalf("second Start: %v, want ErrStarted", err)
	}
	for i := range 2 {
		if err := m.Stop(ctx); err != nil {
			t.Fatalf("Stop #%d: %v", i+1, err)
		}
	}
	if err := m.Start(ctx); !errors.Is(err, promotion.ErrStopped) {
		t.Fatalf("Start after Stop: %v, want ErrStopped", err)
	}

	early := mk()
	if err := early.Stop(ctx); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	if err := early.Start(ctx); !errors.Is(err, promotion.ErrStopped) {
		t.Fatalf("Start after an early Stop: %v, want ErrStopped", err)
	}
}
