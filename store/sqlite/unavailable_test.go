package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/dibsio/dibs/store"
)

func TestTransientCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		code      int
		transient bool
	}{
		{"BUSY", sqlite3.SQLITE_BUSY, true},
		{"BUSY_SNAPSHOT", sqlite3.SQLITE_BUSY_SNAPSHOT, true},
		{"LOCKED", sqlite3.SQLITE_LOCKED, true},
		{"INTERRUPT", sqlite3.SQLITE_INTERRUPT, true},
		{"ABORT_ROLLBACK", sqlite3.SQLITE_ABORT_ROLLBACK, true},
		{"NOMEM", sqlite3.SQLITE_NOMEM, true},
		{"READONLY", sqlite3.SQLITE_READONLY, true},
		{"READONLY_DBMOVED", sqlite3.SQLITE_READONLY_DBMOVED, true},
		{"CANTOPEN", sqlite3.SQLITE_CANTOPEN, true},
		{"PERM", sqlite3.SQLITE_PERM, true},
		{"IOERR", sqlite3.SQLITE_IOERR, true},
		{"IOERR_FSYNC", sqlite3.SQLITE_IOERR_FSYNC, true},
		{"FULL", sqlite3.SQLITE_FULL, true},
		{"PROTOCOL", sqlite3.SQLITE_PROTOCOL, true},
		{"SCHEMA", sqlite3.SQLITE_SCHEMA, true},
		{"CORRUPT", sqlite3.SQLITE_CORRUPT, true},
		{"NOTADB", sqlite3.SQLITE_NOTADB, true},
		{"CONSTRAINT", sqlite3.SQLITE_CONSTRAINT, false},
		{"CONSTRAINT_UNIQUE", sqlite3.SQLITE_CONSTRAINT_UNIQUE, false},
		{"CONSTRAINT_CHECK", sqlite3.SQLITE_CONSTRAINT_CHECK, false},
		{"ERROR", sqlite3.SQLITE_ERROR, false},
		{"MISMATCH", sqlite3.SQLITE_MISMATCH, false},
		{"TOOBIG", sqlite3.SQLITE_TOOBIG, false},
		{"RANGE", sqlite3.SQLITE_RANGE, false},
		{"MISUSE", sqlite3.SQLITE_MISUSE, false},
	}
	for _, tt := range tests {
		if got := transientCode(tt.code); got != tt.transient {
			t.Errorf("transientCode(SQLITE_%s = %d) = %t, want %t", tt.name, tt.code, got, tt.transient)
		}
	}
}

// TestUnavailableErrors provokes real SQLite errors and classifies them.
func TestUnavailableErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	db := func(t *testing.T, dsn string) *sql.DB {
		t.Helper()
		d, err := sql.Open("sqlite", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	path := filepath.Join(dir, "ok.db")
	rw := db(t, path)
	if _, err := rw.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL CHECK (v <> ''));
		INSERT INTO t VALUES (1, 'a')`); err != nil {
		t.Fatal(err)
	}
	notADB := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(notADB, []byte("this is not a database file, not at all, not even close to one"), 0o600); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	tests := []struct {
		name      string
		run       func(t *testing.T) error
		transient bool
	}{
		{"read-only file", func(t *testing.T) error {
			_, err := db(t, "file:"+path+"?mode=ro").ExecContext(ctx, `INSERT INTO t VALUES (2, 'b')`)
			return err
		}, true},
		{"cannot open", func(t *testing.T) error {
			return db(t, filepath.Join(dir, "missing", "dir", "x.db")).PingContext(ctx)
		}, true},
		{"not a database", func(t *testing.T) error {
			_, err := db(t, notADB).ExecContext(ctx, `SELECT count(*) FROM sqlite_master`)
			return err
		}, true},
		{"unique violation", func(t *testing.T) error {
			_, err := rw.ExecContext(ctx, `INSERT INTO t VALUES (1, 'again')`)
			return err
		}, false},
		{"check violation", func(t *testing.T) error {
			_, err := rw.ExecContext(ctx, `INSERT INTO t VALUES (3, '')`)
			return err
		}, false},
		{"syntax error", func(t *testing.T) error {
			_, err := rw.ExecContext(ctx, `INSERT INTO nowhere VALUES (`)
			return err
		}, false},
		{"cancelled by the caller", func(t *testing.T) error {
			_, err := rw.ExecContext(cancelled, `INSERT INTO t VALUES (4, 'd')`)
			return err
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.run(t)
			if err == nil {
				t.Fatal("no error")
			}
			if got := unavailable(err); got != tt.transient {
				t.Errorf("unavailable(%v) = %t, want %t", err, got, tt.transient)
			}
			wrapped := wrapErr("op", fmt.Errorf("call: %w", err))
			if got := errors.Is(wrapped, store.ErrUnavailable); got != tt.transient {
				t.Errorf("wrapErr(%v) is ErrUnavailable: %t, want %t", err, got, tt.transient)
			}
		})
	}
}
