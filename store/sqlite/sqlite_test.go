package sqlite_test

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/sqlite"
	"github.com/dibsio/dibs/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// open returns a fresh, migrated store on a file in a temporary directory.
func open(tb testing.TB) store.Store {
	tb.Helper()
	return openPath(tb, filepath.Join(tb.TempDir(), "dibs.db"))
}

// openPath returns a migrated store on the file at path, closed when the
// test ends.
func openPath(tb testing.TB, path string) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.New(tb.Context(), sqlite.Config{Path: path})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	if err := s.Migrate(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return open(t) })
}

func BenchmarkIssueBatch(b *testing.B) {
	storetest.Bench(b, open)
}

// TestMigrateFilled applies migration 0011 (issued without a rowid) to a
// database that holds rows written under 0010 (and the later migrations,
// which add columns 0011 does not touch).
func TestMigrateFilled(t *testing.T) {
	t.Parallel()
	s, err := sqlite.New(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "dibs.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := sqlite.MigrateSkipping(t.Context(), s, 11); err != nil {
		t.Fatal(err)
	}
	storetest.MigrateFilled(t, s)
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		want    sqlite.Config
		wantErr bool
	}{
		{url: "sqlite://dibs.db", want: sqlite.Config{Path: "dibs.db"}},
		{url: "sqlite://data/dibs.db", want: sqlite.Config{Path: "data/dibs.db"}},
		{url: "sqlite:///var/lib/dibs/dibs.db", want: sqlite.Config{Path: "/var/lib/dibs/dibs.db"}},
		{
			url:  "sqlite://dibs.db?synchronous=full&busy_timeout=2s&read_conns=8",
			want: sqlite.Config{Path: "dibs.db", Synchronous: "full", BusyTimeout: 2 * time.Second, ReadConns: 8},
		},
		{url: "postgres://x/y", wantErr: true},
		{url: "sqlite://", wantErr: true},
		{url: "sqlite://dibs.db?cache=shared", wantErr: true},
		{url: "sqlite://dibs.db?busy_timeout=5", wantErr: true},
		{url: "sqlite://dibs.db?read_conns=many", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			got, err := sqlite.ParseURL(tt.url)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseURL = %+v, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseURL = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, cfg := range []sqlite.Config{
		{},
		{Path: filepath.Join(dir, "a.db"), Synchronous: "off"},
		{Path: filepath.Join(dir, "a.db"), BusyTimeout: -time.Second},
		{Path: filepath.Join(dir, "a.db"), ReadConns: -1},
		{Path: filepath.Join(dir, "a.db?x=y")},
	} {
		if s, err := sqlite.New(t.Context(), cfg); err == nil {
			_ = s.Close()
			t.Errorf("New(%+v): no error", cfg)
		}
	}
}

func TestStoreOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "dibs.db")
	s, err := store.Open(t.Context(), "sqlite://"+path+"?synchronous=full")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePromotion(t.Context(), store.Promotion{ID: "p", Mode: store.ModeFirstCome, Kind: store.KindCoupon}); err != nil {
		t.Fatal(err)
	}

	// The file is in WAL mode (a persistent setting), seen from another connection.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}

	for _, url := range []string{"mysql://x/y", "dibs.db", "sqlite://"} {
		if s, err := store.Open(t.Context(), url); err == nil {
			_ = s.Close()
			t.Errorf("store.Open(%q): no error", url)
		}
	}
}

// TestMigrateConcurrently migrates one new file from two stores (as two
// processes would) at once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "dibs.db")
	const n = 4
	var (
		wg   sync.WaitGroup
		errs = make([]error, n)
	)
	for i := range n {
		s, err := sqlite.New(t.Context(), sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		wg.Go(func() { errs[i] = s.Migrate(t.Context()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := migrationFiles(t)
	var versions int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&versions); err != nil || versions != want {
		t.Fatalf("%d versions recorded (%v), want %d", versions, err, want)
	}
}

// migrationFiles counts the migrations the package embeds.
func migrationFiles(t *testing.T) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v, %v", files, err)
	}
	return len(files)
}

// TestBusyIsUnavailable holds the write lock from another connection (as
// another process would): a write that cannot get it within the busy
// timeout fails with ErrUnavailable, and succeeds once the lock is released.
func TestBusyIsUnavailable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "dibs.db")
	s, err := sqlite.New(t.Context(), sqlite.Config{Path: path, BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	p := store.Promotion{ID: "p", Mode: store.ModeFirstCome, Kind: store.KindCoupon}
	err = s.CreatePromotion(t.Context(), p)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("write while another connection holds the lock: %v, want ErrUnavailable", err)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePromotion(t.Context(), p); err != nil {
		t.Fatalf("write after the lock was released: %v", err)
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
	path := filepath.Join(t.TempDir(), "dibs.db")
	first, err := os.ReadFile(filepath.Join("migrations", "0001_init.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		string(first),
		`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL) STRICT`,
		`INSERT INTO schema_migrations VALUES (1, 'init', '2026-01-01T00:00:00.000000Z')`,
		`INSERT INTO dead_letters (claim_id, promotion_id, user_id, rank, slot, reason, deliveries, state, at)
			VALUES ('old#1', 'old', 'u', 1, 1, 'failed', 5, 'replayed', '2026-01-01T00:00:00.000000Z')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}

	s := openPath(t, path)
	if ds, err := s.ListUnappliedDeadLetters(ctx, time.Now().Add(time.Hour), 10); err != nil || len(ds) != 0 {
		t.Fatalf("unapplied after the upgrade = %+v, %v; want none", ds, err)
	}
	applied := func(claimID string) (int, sql.NullString) {
		t.Helper()
		var (
			a       int
			movedAt sql.NullString
		)
		if err := db.QueryRowContext(ctx, `SELECT applied, moved_at FROM dead_letters WHERE claim_id = ?`,
			claimID).Scan(&a, &movedAt); err != nil {
			t.Fatal(err)
		}
		return a, movedAt
	}
	if a, movedAt := applied("old#1"); a != 1 || movedAt.Valid {
		t.Fatalf("old#1: applied %d, moved_at %v; want 1 and NULL", a, movedAt)
	}

	d := store.DeadLetter{ClaimID: "new#1", PromotionID: "new", UserID: "u", Rank: 1, Slot: 1,
		Reason: "failed", Deliveries: 5, At: time.Now()}
	if err := s.RecordDeadLetter(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TransitionDeadLetters(ctx, "new", nil, store.DeadReplayed); err != nil {
		t.Fatal(err)
	}
	if a, movedAt := applied("new#1"); a != 0 || !movedAt.Valid {
		t.Fatalf("new#1 replayed: applied %d, moved_at %v; want 0 and a time", a, movedAt)
	}
	if err := s.RecordDeadLetter(ctx, d); err != nil {
		t.Fatal(err)
	}
	if a, _ := applied("new#1"); a != 1 {
		t.Fatalf("new#1 failed again: applied %d, want 1", a)
	}
}

// TestUpgradeKeepsTheAbandonmentTime migrates a database made before
// waiting rooms had their own abandonment time: a promotion with a room
// keeps the 120 s it had, one without stays at 0, and neither has a
// prequeue.
func TestUpgradeKeepsTheAbandonmentTime(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "dibs.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, f := range []string{"0001_init.sql", "0002_dead_letter_applied.sql"} {
		q, err := os.ReadFile(filepath.Join("migrations", f))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, string(q)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	for _, q := range []string{
		`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL) STRICT`,
		`INSERT INTO schema_migrations VALUES (1, 'init', '2026-01-01T00:00:00.000000Z'), (2, 'dead_letter_applied', '2026-01-01T00:00:00.000000Z')`,
		`INSERT INTO promotions (id, name, mode, kind, stock, per_user_limit, value, starts_at, ends_at, created_at,
			waiting_room_enabled, waiting_room_admit_per_second, waiting_room_entry_ttl_seconds)
			VALUES ('roomed', '', 'first_come', 'coupon', 10, 1, 0, '2026-01-01T00:00:00.000000Z', '2026-01-02T00:00:00.000000Z',
			'2026-01-01T00:00:00.000000Z', 1, 100, 300),
			('plain', '', 'first_come', 'coupon', 10, 1, 0, '2026-01-01T00:00:00.000000Z', '2026-01-02T00:00:00.000000Z',
			'2026-01-01T00:00:00.000000Z', 0, 0, 0)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}
	s := openPath(t, path)
	for id, want := range map[string]store.WaitingRoom{
		"roomed": {Enabled: true, AdmitPerSecond: 100, EntryTTLSeconds: 300, AbandonAfterSeconds: 120},
		"plain":  {},
	} {
		p, err := s.GetPromotion(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p.WaitingRoom, want) {
			t.Errorf("%s after the upgrade: %+v, want %+v", id, p.WaitingRoom, want)
		}
	}
}
