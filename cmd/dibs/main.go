// Command dibs runs limited-stock, first-come-first-served promotions on Redis
// and confirms every accepted claim into a SQL database exactly once.
//
// Usage:
//
//	dibs serve    run the HTTP API, the consumers and the schedulers
//	dibs demo     run the seed scenario against a throw-away server
//	dibs bench    load-generate against a running server
//	dibs promo    create, list, show, close, pause, resume and change promotions on a running server
//	dibs grant    upload a grant promotion's target users from a file
//	dibs dlq      list, replay and void a promotion's dead letters
//	dibs status   a live view of a promotion
//	dibs user     a user's claims and standing across promotions
//	dibs report   the summary of a drop, as Markdown or JSON
//	dibs migrate  apply the database schema and exit
//	dibs version  print the version, the commit and the build date (also dibs --version)
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts a graceful stop; a second one ends the process
	// at once, as if no handler were installed.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
