package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dibsio/dibs/internal/testkit/pgtest"
	"github.com/dibsio/dibs/internal/testkit/wait"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/postgres"
	"github.com/dibsio/dibs/store/storetest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m)
}

// newStore returns an unmigrated store on url, closed when the test ends.
func newStore(tb testing.TB, url string) *postgres.Store {
	tb.Helper()
	s, err := postgres.New(tb.Context(), postgres.Config{URL: url})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// open returns a fresh, migrated store in its own database.
func open(tb testing.TB) store.Store {
	tb.Helper()
	s := newStore(tb, pgtest.URL(tb))
	if err := s.Migrate(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
}

// TestMigrateFilled applies migration 0011 (the new layout of issued) to a
// database that holds rows written under 0010 (and the later migrations,
// which add columns 0011 does not touch).
func TestMigrateFilled(t *testing.T) {
	t.Parallel()
	s := newStore(t, pgtest.URL(t))
	if err := postgres.MigrateSkipping(t.Context(), s, 11); err != nil {
		t.Fatal(err)
	}
	storetest.MigrateFilled(t, s)
}

// TestMigrateFilledPrebuilt is TestMigrateFilled where the operator built
// the new key's index beforehand, CONCURRENTLY, as operations.md says: the
// migration takes it as it is.
func TestMigrateFilledPrebuilt(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := newStore(t, url)
	if err := postgres.MigrateSkipping(t.Context(), s, 11); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `CREATE UNIQUE INDEX CONCURRENTLY issued_user_promotion_slot
		ON issued (user_id, promotion_id, slot)`); err != nil {
		t.Fatal(err)
	}
	storetest.MigrateFilled(t, s)
}

// TestMigrateConcurrently migrates one empty database from several stores
// (as several processes would) at once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	const n = 4
	var (
		wg   sync.WaitGroup
		errs = make([]error, n)
	)
	for i := range n {
		s := newStore(t, url)
		wg.Go(func() { errs[i] = s.Migrate(t.Context()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, url)
	var versions int
	if err := s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM schema_migrations`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v, %v", files, err)
	}
	if versions != len(files) {
		t.Fatalf("%d versions recorded, want %d", versions, len(files))
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     postgres.Config
		wantErr bool
		want    int32
	}{
		{"default pool", postgres.Config{URL: "postgres://u@127.0.0.1:1/db"}, false, postgres.DefaultMaxConns},
		{"pool from URL", postgres.Config{URL: "postgres://u@127.0.0.1:1/db?pool_max_conns=3"}, false, 3},
		{"pool from Config", postgres.Config{URL: "postgres://u@127.0.0.1:1/db?pool_max_conns=3", MaxConns: 5}, false, 5},
		{"no URL", postgres.Config{}, true, 0},
		{"bad URL", postgres.Config{URL: "postgres://u@127.0.0.1:1/db?pool_max_conns=x"}, true, 0},
		{"negative pool", postgres.Config{URL: "postgres://u@127.0.0.1:1/db", MaxConns: -1}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := postgres.New(t.Context(), tt.cfg)
			if tt.wantErr {
				if err == nil {
					_ = s.Close()
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.Pool().Config().MaxConns; got != tt.want {
				t.Fatalf("MaxConns = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestOutage stops the database under a working store: every call fails
// with ErrUnavailable, and works again once the database is back.
func TestOutage(t *testing.T) {
	t.Parallel()
	srv := pgtest.Fresh(t)
	ctx := t.Context()
	s := newStore(t, srv.URL())
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	p := store.Promotion{ID: "outage", Name: "outage", Mode: store.ModeFirstCome, Kind: store.KindCoupon,
		Stock: 10, PerUserLimit: 1, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)}
	if err := s.CreatePromotion(ctx, p); err != nil {
		t.Fatal(err)
	}
	issue := func(rank int64) store.Issue {
		return store.Issue{ClaimID: fmt.Sprintf("outage#%d", rank), PromotionID: "outage",
			UserID: fmt.Sprintf("u%d", rank), Rank: rank, Slot: 1, AcceptedAt: time.Now()}
	}
	if _, err := s.IssueBatch(ctx, []store.Issue{issue(1)}); err != nil {
		t.Fatal(err)
	}

	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := srv.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"Ping", func() error { return s.Ping(ctx) }},
		{"GetPromotion", func() error { _, err := s.GetPromotion(ctx, "outage"); return err }},
		{"IssueBatch", func() error { _, err := s.IssueBatch(ctx, []store.Issue{issue(2)}); return err }},
		{"Counts", func() error { _, err := s.Counts(ctx, "outage"); return err }},
		{"RecordDeadLetter", func() error {
			return s.RecordDeadLetter(ctx, store.DeadLetter{ClaimID: "outage#9", PromotionID: "outage", At: time.Now()})
		}},
		{"Migrate", func() error { return s.Migrate(ctx) }},
	}
	for _, c := range calls {
		err := c.call()
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the database down: %v, want ErrUnavailable", c.name, err)
		}
	}

	if err := srv.Start(stopCtx); err != nil {
		t.Fatal(err)
	}
	// The pool drops its dead connections as it meets them; wait (bounded)
	// until a call gets through, then everything works.
	wait.NoError(t, 30*time.Second, "recovery", func() error { return s.Ping(ctx) })
	out, err := s.IssueBatch(ctx, []store.Issue{issue(1), issue(2)})
	if err != nil {
		t.Fatalf("IssueBatch after the restart: %v", err)
	}
	if out[0] != store.Duplicate || out[1] != store.Inserted {
		t.Fatalf("outcomes %v, want [duplicate inserted]", out)
	}
	c, err := s.Counts(ctx, "outage")
	if err != nil || c.Issued != 2 {
		t.Fatalf("Counts = %+v, %v; want 2 issued", c, err)
	}
}

// TestUnavailableNotForBugs checks that errors that are not outages are not
// reported as such.
func TestUnavailableNotForBugs(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := t.Context()
	_, err := s.GetPromotion(ctx, "missing")
	if !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("missing promotion: %v", err)
	}
	bad := store.Promotion{ID: "bad", Mode: "bogus", Kind: store.KindCoupon}
	err = s.CreatePromotion(ctx, bad)
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("invalid mode: %v, want a non-outage error", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Ping(canceled); err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ping with a cancelled context: %v, want a non-outage error", err)
	}
}

func BenchmarkIssueBatch(b *testing.B) {
	storetest.Bench(b, open)
}

func TestStoreOpen(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	for _, u := range []string{url, "postgresql" + url[len("postgres"):]} {
		s, err := store.Open(t.Context(), u)
		if err != nil {
			t.Fatalf("store.Open(%s): %v", u, err)
		}
		err = s.Migrate(t.Context())
		_ = s.Close()
		if err != nil {
			t.Fatalf("Migrate through %s: %v", u, err)
		}
	}
}

// TestUpgradeKeepsDeadLettersApplied migrates a database that holds only
// the first migration and a dead letter moved before the upgrade: that move
// counts as applied, so the recovery sweep leaves it alone. It then checks
// that a claim failing again after a replay is stored as applied, which the
// store's interface cannot show (a failed claim is never listed as pending).
func TestUpgradeKeepsDeadLettersApplied(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t, pgtest.URL(t))
	first, err := os.ReadFile(filepath.Join("migrations", "0001_init.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		string(first),
		`CREATE TABLE schema_migrations (version integer NOT NULL PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
		`INSERT INTO schema_migrations (version, name) VALUES (1, 'init')`,
		`INSERT INTO dead_letters (claim_id, promotion_id, user_id, rank, slot, reason, deliveries, state, at)
			VALUES ('old#1', 'old', 'u', 1, 1, 'failed', 5, 'replayed', now())`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if ds, err := s.ListUnappliedDeadLetters(ctx, time.Now().Add(time.Hour), 10); err != nil || len(ds) != 0 {
		t.Fatalf("unapplied after the upgrade = %+v, %v; want none", ds, err)
	}
	applied := func(claimID string) (bool, *time.Time) {
		t.Helper()
		var (
			a       bool
			movedAt *time.Time
		)
		if err := s.Pool().QueryRow(ctx, `SELECT applied, moved_at FROM dead_letters WHERE claim_id = $1`,
			claimID).Scan(&a, &movedAt); err != nil {
			t.Fatal(err)
		}
		return a, movedAt
	}
	if a, movedAt := applied("old#1"); !a || movedAt != nil {
		t.Fatalf("old#1: applied %v, moved_at %v; want true and NULL", a, movedAt)
	}

	d := store.DeadLetter{ClaimID: "new#1", PromotionID: "new", UserID: "u", Rank: 1, Slot: 1,
		Reason: "failed", Deliveries: 5, At: time.Now()}
	if err := s.RecordDeadLetter(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionDeadLetters(ctx, "new", nil, store.DeadReplayed); err != nil {
		t.Fatal(err)
	}
	if a, movedAt := applied("new#1"); a || movedAt == nil {
		t.Fatalf("new#1 replayed: applied %v, moved_at %v; want false and a time", a, movedAt)
	}
	if err := s.RecordDeadLetter(ctx, d); err != nil {
		t.Fatal(err)
	}
	if a, _ := applied("new#1"); !a {
		t.Fatal("new#1 failed again: not applied")
	}
}
