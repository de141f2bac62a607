package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dibsio/dibs/internal/testkit/pgtest"
	"github.com/dibsio/dibs/store"
	"github.com/dibsio/dibs/store/postgres"
)

func TestUnavailableBySQLState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code, name string
		transient  bool
	}{
		{"08006", "connection_failure", true},
		{"08P01", "protocol_violation", true},
		{"28P01", "invalid_password", true},
		{"3D000", "invalid_catalog_name", true},
		{"40001", "serialization_failure", true},
		{"40P01", "deadlock_detected", true},
		{"53100", "disk_full", true},
		{"53200", "out_of_memory", true},
		{"53300", "too_many_connections", true},
		{"57014", "query_canceled", true},
		{"57P01", "admin_shutdown", true},
		{"57P03", "cannot_connect_now", true},
		{"57P04", "database_dropped", true},
		{"58030", "io_error", true},
		{"25006", "read_only_sql_transaction", true},
		{"25P03", "idle_in_transaction_session_timeout", true},
		{"55P03", "lock_not_available", true},
		{"55006", "object_in_use", true},
		{"72000", "snapshot_too_old", true},
		{"23505", "unique_violation", false},
		{"23514", "check_violation", false},
		{"22P02", "invalid_text_representation", false},
		{"22001", "string_data_right_truncation", false},
		{"42P01", "undefined_table", false},
		{"42601", "syntax_error", false},
		{"25001", "active_sql_transaction", false},
		{"55000", "object_not_in_prerequisite_state", false},
		{"XX000", "internal_error", false},
		{"", "no code", false},
		{"08", "short code", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := fmt.Errorf("exec: %w", &pgconn.PgError{Code: tt.code, Message: tt.name})
			if got := postgres.Unavailable(err); got != tt.transient {
				t.Errorf("Unavailable(SQLSTATE %s) = %t, want %t", tt.code, got, tt.transient)
			}
			if got := postgres.TransientSQLState(tt.code); got != tt.transient {
				t.Errorf("TransientSQLState(%s) = %t, want %t", tt.code, got, tt.transient)
			}
		})
	}
}

// degradedStore returns a store on a migrated database holding promotion
// p, whose every new session first runs settings (ALTER DATABASE ... SET),
// after setup ran on it.
func degradedStore(t *testing.T, setup []string, settings ...string) *postgres.Store {
	t.Helper()
	ctx := t.Context()
	url := pgtest.URL(t)
	s := newStore(t, url)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePromotion(ctx, store.Promotion{ID: "p", Name: "p", Mode: store.ModeFirstCome, Kind: store.KindCoupon,
		Stock: 10, PerUserLimit: 1, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var db string
	if err := s.Pool().QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	for _, q := range setup {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, set := range settings {
		if _, err := s.Pool().Exec(ctx, "ALTER DATABASE "+db+" SET "+set); err != nil {
			t.Fatalf("%s: %v", set, err)
		}
	}
	// A new pool: its sessions start with the settings.
	return newStore(t, url)
}

func degradedIssue() store.Issue {
	return store.Issue{ClaimID: "p#1", PromotionID: "p", UserID: "u", Rank: 1, Slot: 1, AcceptedAt: time.Now()}
}

// TestReadOnlyDatabaseIsUnavailable: a database that turned read-only (as a
// standby promoted late, or a primary demoted in a failover, looks) refuses
// writes with ErrUnavailable, never as a failure of the claims.
func TestReadOnlyDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	s := degradedStore(t, nil, "default_transaction_read_only = on")
	ctx := t.Context()
	if _, err := s.IssueBatch(ctx, []store.Issue{degradedIssue()}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("IssueBatch on a read-only database: %v, want ErrUnavailable", err)
	}
	err := s.RecordDeadLetter(ctx, store.DeadLetter{ClaimID: "p#2", PromotionID: "p", UserID: "u", Rank: 2, Slot: 1, At: time.Now()})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("RecordDeadLetter on a read-only database: %v, want ErrUnavailable", err)
	}
	if _, err := s.Counts(ctx, "p"); err != nil {
		t.Errorf("Counts on a read-only database: %v", err)
	}
}

// TestStatementTimeoutIsUnavailable: an insert that runs past
// statement_timeout (here held by a trigger) is cancelled by the server;
// that is ErrUnavailable, and nothing is written.
func TestStatementTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	s := degradedStore(t, []string{
		`CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_sleep(60); RETURN NEW; END $$`,
		`CREATE TRIGGER slow BEFORE INSERT ON issued FOR EACH ROW EXECUTE FUNCTION slow()`,
	}, "statement_timeout = '200ms'")
	ctx := t.Context()
	_, err := s.IssueBatch(ctx, []store.Issue{degradedIssue()})
	var pgErr *pgconn.PgError
	if !errors.Is(err, store.ErrUnavailable) || !errors.As(err, &pgErr) || pgErr.Code != "57014" {
		t.Fatalf("IssueBatch past statement_timeout: %v, want ErrUnavailable with SQLSTATE 57014", err)
	}
	if c, err := s.Counts(ctx, "p"); err != nil || c.Issued != 0 {
		t.Fatalf("Counts = %+v, %v; want nothing issued", c, err)
	}
}
