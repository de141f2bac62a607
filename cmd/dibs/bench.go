package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/dibsio/dibs/bench"
	"github.com/dibsio/dibs/internal/assembly/demo"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", "[--server http://HOST:PORT] [flags]", stderr,
		"Creates a promotion, fires claims, waits until every accepted claim is issued and",
		"reports throughput, latency and the invariant checks. Exits 0 only if every check",
		"passed. Without --server it starts its own server on the embedded default. The",
		"server's admin token is best given as DIBS_ADMIN_TOKEN, which ps does not show.")
	target := new(string)
	fs.StringVar(target, "server", "", "base URL of a running dibs server; empty starts a local one")
	fs.StringVar(target, "target", "", "the same as --server")
	token := fs.String("admin-token", "", "admin bearer token of the server; better the environment variable DIBS_ADMIN_TOKEN, which ps does not show")
	promotion := fs.String("promotion", "", "id of the promotion to create (default: bench-<time>-<random>)")
	stock := fs.Int("stock", bench.DefaultStock, "promotion stock")
	users := fs.Int("users", bench.DefaultUsers, "number of distinct users")
	concurrency := fs.Int("concurrency", bench.DefaultConcurrency, "claims in flight at once (workers of a steady run)")
	repeat := fs.Int("repeat", bench.DefaultRepeat, "claims per user")
	limit := fs.Int("per-user-limit", bench.DefaultPerUserLimit, "the promotion's per_user_limit")
	waves := fs.Int("waves", 0, "split the claims into this many waves released together behind a barrier (0: steady run with --concurrency workers)")
	confirmTimeout := fs.Duration("confirm-timeout", bench.DefaultConfirmTimeout, "how long to wait for every accepted claim to be issued")
	requestTimeout := fs.Duration("request-timeout", bench.DefaultRequestTimeout, "timeout of each HTTP request")
	var room roomFlags
	room.register(fs)
	var opts demo.Options
	registerRunFlags(fs, &opts)
	if _, err := parseArgs(fs, args, 0, 0); err != nil {
		return err
	}
	if *token == "" {
		*token = os.Getenv("DIBS_ADMIN_TOKEN")
	}
	if *target != "" && *token == "" {
		fmt.Fprintln(stderr, "dibs bench: --admin-token (or DIBS_ADMIN_TOKEN) is required with --server (or --target)")
		return errUsage
	}
	cfg := bench.Config{
		Target:         *target,
		AdminToken:     *token,
		PromotionID:    *promotion,
		Stock:          *stock,
		Users:          *users,
		Concurrency:    *concurrency,
		Repeat:         *repeat,
		PerUserLimit:   *limit,
		Waves:          *waves,
		ConfirmTimeout: *confirmTimeout,
		RequestTimeout: *requestTimeout,
	}
	if room.on {
		room.apply(&cfg)
	}
	return demo.Run(ctx, cfg, opts, stdout, stderr)
}
