package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
		{"version", "print the version, the commit and the build date", runVersion},
	}
}

// errUsage marks an error already reported with usage text.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "--version", "-version":
		args = append([]string{"version"}, args[1:]...)
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return 0
		}
		// dibs help serve is dibs serve --help.
		args = []string{args[1], "--help"}
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
	fmt.Fprintln(w, "dibs runs limited-stock, first-come-first-served promotions on Redis and confirms")
	fmt.Fprintln(w, "every accepted claim into a SQL database exactly once.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: dibs <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'dibs <command> --help' for a command's flags, 'dibs --version' for the build.")
}

// summaryOf is the one line that says what command name does.
func summaryOf(name string) string {
	for _, c := range commands() {
		if c.name == name {
			return c.summary
		}
	}
	return ""
}

// newFlagSet makes the flag set of command name, writing to stderr. Its
// --help (or -h) prints, in this order: the command's summary from
// commands(), capitalised, as the first line; "Usage: dibs <name>
// <synopsis>"; the lines of detail; and the flags written --flag, the way
// the docs write them.
func newFlagSet(name, synopsis string, stderr io.Writer, detail ...string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		w := fs.Output()
		if s := summaryOf(name); s != "" {
			fmt.Fprintf(w, "dibs %s: %s.\n\n", name, s)
		}
		fmt.Fprintln(w, strings.TrimSpace("Usage: dibs "+name+" "+synopsis))
		if len(detail) > 0 {
			fmt.Fprintln(w)
			for _, d := range detail {
				fmt.Fprintln(w, d)
			}
		}
		printFlags(w, fs)
	}
	return fs
}

// printFlags writes the flags of fs as --name, with their kind of value,
// what they do and their default.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "Flags:")
			first = false
		}
		kind, text := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if kind != "" {
			line += " " + kind
		}
		fmt.Fprintln(w, line)
		if hasDefault(f) {
			text += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "        %s\n", text)
	})
}

// hasDefault tells a flag whose default is worth printing: not empty, 0 or
// false.
func hasDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return false
	}
	return true
}

// applyEnv gives every flag of fs that the command line did not set the
// value of its environment variable, if that is set: env maps flag names to
// variable names. The flags' defaults stay the built-in ones, so --help
// never shows a value (a token, say) that came from the environment.
func applyEnv(fs *flag.FlagSet, env map[string]string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, variable := range env {
		v, ok := os.LookupEnv(variable)
		if !ok || set[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%s: %w", variable, err)
		}
	}
	return nil
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
