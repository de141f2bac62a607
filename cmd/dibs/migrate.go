package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/dibsio/dibs/internal/service"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dibs migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", envOr("DIBS_DATABASE_URL", service.DefaultDB), "sqlite://PATH or postgres://... [DIBS_DATABASE_URL]")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if err := service.Migrate(ctx, *db); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "schema up to date: %s\n", service.RedactURL(*db))
	return nil
}
