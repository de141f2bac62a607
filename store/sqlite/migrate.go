package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dibsio/dibs/store/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migrate applies the embedded schema migrations that are not yet recorded in
// schema_migrations, all in one write transaction. Within a process the one
// writer serialises calls; across processes BEGIN IMMEDIATE takes SQLite's
// write lock first, so a second process waits (up to the busy timeout), then
// sees the versions the first one recorded and applies nothing.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrateUpTo(ctx, math.MaxInt)
}

// migrateUpTo is Migrate with the migrations numbered up to version only,
// and without those numbered skip (tests make older databases with them).
func (s *Store) migrateUpTo(ctx context.Context, version int, skip ...int) error {
	return s.migrateWhere(ctx, func(v int) bool { return v <= version && !slices.Contains(skip, v) })
}

// migrateWhere is Migrate with the migrations whose version keep accepts
// only.
func (s *Store) migrateWhere(ctx context.Context, keep func(version int) bool) error {
	all, err := sqlstore.Migrations(migrationFS, math.MaxInt)
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	var ms []sqlstore.Migration
	for _, m := range all {
		if keep(m.Version) {
			ms = append(ms, m)
		}
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER NOT NULL PRIMARY KEY,
			name       TEXT    NOT NULL,
			applied_at TEXT    NOT NULL
		) STRICT`); err != nil {
			return err
		}
		applied := map[int]bool{}
		rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				_ = rows.Close()
				return err
			}
			applied[v] = true
		}
		if err := rows.Close(); err != nil {
			return err
		}
		return sqlstore.ApplyPending(ms, applied, func(m sqlstore.Migration) error {
			_, err := tx.ExecContext(ctx, m.SQL)
			return err
		}, func(m sqlstore.Migration) error {
			_, err := tx.ExecContext(ctx,
				`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, fmtTime(time.Now()))
			return err
		})
	})
	return wrapErr("migrate", err)
}

// SchemaVersion returns the highest migration version applied, 0 before
// any (see store.SchemaVersioner).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, wrapErr("schema version", err)
}
