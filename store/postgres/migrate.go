package postgres

import (
	"context"
	"embed"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/dibsio/dibs/store/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationLock is the advisory lock key that serialises Migrate across
// processes ("dibs" in ASCII).
const migrationLock = 0x64696273

// Migrate applies the embedded schema migrations that are not yet recorded
// in schema_migrations, in one transaction. A transaction-scoped advisory
// lock, taken before anything else, makes concurrent Migrate calls (from
// this process or others) run one after the other: the later ones find
// every version recorded and apply nothing. PostgreSQL DDL is
// transactional, so a failed migration leaves no trace.
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
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	var ms []sqlstore.Migration
	for _, m := range all {
		if keep(m.Version) {
			ms = append(ms, m)
		}
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer     NOT NULL PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return err
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return err
		}
		applied := map[int]bool{}
		for _, v := range versions {
			applied[int(v)] = true
		}
		return sqlstore.ApplyPending(ms, applied, func(m sqlstore.Migration) error {
			// No arguments: pgx sends it with the simple protocol, which
			// allows a file of several statements.
			_, err := tx.Exec(ctx, m.SQL)
			return err
		}, func(m sqlstore.Migration) error {
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`,
				m.Version, m.Name)
			return err
		})
	})
	return wrapErr("migrate", err)
}

// SchemaVersion returns the highest migration version applied, 0 before
// any (see store.SchemaVersioner).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, wrapErr("schema version", err)
}
