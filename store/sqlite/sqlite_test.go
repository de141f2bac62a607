package sqlite_test

import (
	"database/sql"
	"errors"
	"path/filepath"
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
	s, err := sqlite.New(tb.Context(), sqlite.Config{Path: filepath.Join(tb.TempDir(), "dibs.db")})
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
	var versions int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&versions); err != nil || versions != 1 {
		t.Fatalf("%d versions recorded (%v), want 1", versions, err)
	}
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
