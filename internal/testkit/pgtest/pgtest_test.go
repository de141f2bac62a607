package pgtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dibsio/dibs/internal/testkit/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m)
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestURL(t *testing.T) {
	t.Parallel()
	a, b := pgtest.URL(t), pgtest.URL(t)
	if a == b {
		t.Fatalf("two tests share database %s", a)
	}
	ca, cb := connect(t, a), connect(t, b)
	if _, err := ca.Exec(t.Context(), `CREATE TABLE only_in_a (x int)`); err != nil {
		t.Fatal(err)
	}
	// The databases are separate and fresh.
	var n int
	if err := cb.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("table of one database visible in the other")
	}
	var user string
	if err := ca.QueryRow(t.Context(), `SELECT current_user`).Scan(&user); err != nil || user != "postgres" {
		t.Fatalf("current_user = %q, %v; want postgres", user, err)
	}
}

func TestFreshStopStart(t *testing.T) {
	t.Parallel()
	srv := pgtest.Fresh(t)
	ctx := t.Context()
	conn := connect(t, srv.URL())
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := srv.Stop(stopCtx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := srv.Stop(stopCtx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	_, err := pgconn.Connect(ctx, srv.URL())
	if err == nil {
		t.Fatal("connected to a stopped server")
	}
	var connectErr *pgconn.ConnectError
	if !errors.As(err, &connectErr) {
		t.Fatalf("connect to a stopped server: %v, want a ConnectError", err)
	}
	if err := srv.Start(stopCtx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	var x int
	if err := connect(t, srv.URL()).QueryRow(ctx, `SELECT x FROM kept`).Scan(&x); err != nil || x != 42 {
		t.Fatalf("after restart: x = %d, %v; want the data kept", x, err)
	}
}
