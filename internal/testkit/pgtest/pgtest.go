package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/dibsio/dibs/internal/testkit/testmain"
)

// Timeouts of the helpers.
const (
	// StartTimeout bounds initdb plus starting a server.
	StartTimeout = 60 * time.Second
	// StopTimeout bounds a server's shutdown before it is killed.
	StopTimeout = 10 * time.Second
	// DropTimeout bounds dropping a test's database at cleanup.
	DropTimeout = 10 * time.Second
)

// Main runs the tests through testmain.Main, which stops the binary-wide
// server after them and then fails the binary if goroutines leaked. A test
// binary that also uses redistest calls redistest.Main instead: it stops
// this server too.
func Main(m *testing.M, opts ...goleak.Option) {
	testmain.Main(m, opts...)
}

// shared is the binary-wide server and a small pool on its postgres
// database that creates and drops the tests' databases.
type shared struct {
	srv   *Server
	admin *pgxpool.Pool
}

var (
	sharedOnce = sync.OnceValues(startShared)
	dbCounter  atomic.Int64
)

func startShared() (*shared, error) {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	srv, err := newServer(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		_ = srv.remove(ctx)
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	cfg.MaxConns = 4
	admin, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		_ = srv.remove(ctx)
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	testmain.RegisterCleanup(func() {
		admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		if err := srv.remove(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop shared postgres: %v\n", err)
		}
	})
	return &shared{srv: srv, admin: admin}, nil
}

// createDatabase creates database name. A connection of the admin pool
// the server ended (57P01, admin_shutdown: seen once when a session was
// cut while the machine was loaded) is dropped by the pool, so the
// statement is tried again on another, twice at most.
func createDatabase(ctx context.Context, admin *pgxpool.Pool, name string) error {
	var err error
	for range 3 {
		_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || pe.Code != "57P01" {
			return err
		}
	}
	return err
}

// URL returns the URL of a fresh, empty database for this test, created in
// the binary-wide PostgreSQL (started on first use, stopped by Main after
// the tests) and dropped when the test ends. Tests
// running in parallel each get their own database.
func URL(t testing.TB) string {
	t.Helper()
	sh, err := sharedOnce()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("t_%d", dbCounter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	if err := createDatabase(ctx, sh.admin, name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), DropTimeout)
		defer cancel()
		// FORCE disconnects sessions a test left open.
		if _, err := sh.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return sh.srv.urlFor(name)
}

// Fresh starts a dedicated PostgreSQL for this test, for tests that stop and
// restart the database: Stop and Start keep its data directory and port. It
// is stopped and deleted when the test ends.
func Fresh(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	srv, err := newServer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		if err := srv.remove(ctx); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return srv
}
