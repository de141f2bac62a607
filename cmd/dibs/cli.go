package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/dibsio/dibs/internal/demo"
)

// command is one subcommand: it parses its own flags from args.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "run the HTTP API, the confirmation consumers and the schedulers", runServe},
		{"demo", "run the seed scenario (1,000 stock, 2,000 users) against a throw-away server", runDemo},
		{"bench", "load-generate claims against a server and report throughput and latency", runBench},
		{"migrate", "apply the database schema and exit", runMigrate},
		{"version", "print the version", runVersion},
	}
}

// errUsage marks an error already reported with usage text.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			msg := err.Error()
			if c.name == "serve" || c.name == "migrate" {
				// A one-line reason, whatever the error text holds
				// (drivers like to add a line per address they tried).
				msg = strings.Join(strings.Fields(msg), " ")
			}
			fmt.Fprintf(stderr, "dibs %s: %s\n", c.name, msg)
			return 1
		}
	}
	fmt.Fprintf(stderr, "dibs: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: dibs <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'dibs <command> -h' for a command's flags.")
}

// parseFlags parses args and maps failures to the CLI's conventions: -h is
// flag.ErrHelp, anything else (already reported by the flag set) errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "dibs %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}

// registerRunFlags defines the output and local-server flags demo and bench
// share.
func registerRunFlags(fs *flag.FlagSet, o *demo.Options) {
	fs.BoolVar(&o.JSON, "json", false, "print the report as one JSON object (progress goes to stderr)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the local server's temporary directory (database, Redis AOF, log)")
	fs.BoolVar(&o.ServerLog, "server-log", false, "stream the local server's log to stderr")
}
