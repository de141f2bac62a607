package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/dibsio/dibs/bench"
	"github.com/dibsio/dibs/internal/demo"
)

// The seed scenario: 1,000 stock, 2,000 users in 10 waves of 200.
const (
	demoStock = 1000
	demoUsers = 2000
	demoWaves = 10
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: dibs demo [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Starts a throw-away server on the embedded default (a private redis-server and a")
		fmt.Fprintln(stderr, "SQLite file in a temporary directory), runs the seed scenario through the HTTP API,")
		fmt.Fprintln(stderr, "prints the report and exits 0 only if every invariant held.")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Flags:")
		fs.PrintDefaults()
	}
	stock := fs.Int("stock", demoStock, "promotion stock")
	users := fs.Int("users", demoUsers, "number of users, each claiming once")
	waves := fs.Int("waves", demoWaves, "number of waves the users are split into; each wave's claims start together")
	confirmTimeout := fs.Duration("confirm-timeout", bench.DefaultConfirmTimeout, "how long to wait for every accepted claim to be issued")
	var opts demo.Options
	registerRunFlags(fs, &opts)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg := bench.Config{
		Stock:          *stock,
		Users:          *users,
		Waves:          *waves,
		PerUserLimit:   1,
		ConfirmTimeout: *confirmTimeout,
	}
	if *waves < 1 {
		fmt.Fprintln(stderr, "dibs demo: --waves must be at least 1")
		return errUsage
	}
	return demo.Run(ctx, cfg, opts, stdout, stderr)
}
