package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/dibsio/dibs/store"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dibs migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", envOr("DIBS_DATABASE_URL", "sqlite://dibs.db"), "sqlite://PATH or postgres://... [DIBS_DATABASE_URL]")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	st, err := store.Open(ctx, *db)
	if err != nil {
		return fmt.Errorf("database %s: %w", redactURL(*db), err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("database %s: migrate: %w", redactURL(*db), err)
	}
	fmt.Fprintf(stdout, "schema up to date: %s\n", redactURL(*db))
	return nil
}
