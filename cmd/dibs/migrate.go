package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/dibsio/dibs/internal/assembly/service"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate", "[--db URL]", stderr,
		"Brings the database's schema up to this version's and exits; dibs serve does the same",
		"as it starts. Migrations only add, so the previous release runs on the migrated schema.")
	db := fs.String("db", service.DefaultDB, "sqlite://PATH or postgres://... [DIBS_DATABASE_URL]")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := service.CheckEnv(os.Environ(), service.EnvDatabaseURL); err != nil {
		return err
	}
	if err := applyEnv(fs, map[string]string{"db": service.EnvDatabaseURL}); err != nil {
		return err
	}
	if err := service.Migrate(ctx, *db); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema up to date: %s\n", service.RedactURL(*db))
	return nil
}
