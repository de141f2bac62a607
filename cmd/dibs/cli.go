package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dibsio/dibs/client"
	"github.com/dibsio/dibs/internal/assembly/demo"
	"github.com/dibsio/dibs/internal/assembly/service"
	"github.com/dibsio/dibs/internal/buildinfo"
)

// command is one subcommand: it parses its own flags from args.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// ops marks a command that operates a running server through the API:
	// its errors are one line with the problem's code and its exit codes
	// say who said no (see exitOps).
	ops bool
}

func commands() []command {
	return []command{
		{"serve", "run the HTTP API, the confirmation consumers and the schedulers", runServe, false},
		{"demo", "run the seed scenario (1,000 stock, 2,000 users) against a throw-away server", runDemo, false},
		{"bench", "load-generate claims against a server and report throughput and latency", runBench, false},
		{"promo", "create, list, show, close, pause, resume and change promotions on a running server", runPromo, true},
		{"grant", "upload the target users of a grant promotion from a file", runGrant, true},
		{"dlq", "list, replay and void a promotion's dead letters", runDLQ, true},
		{"status", "a live view of a promotion: counts, rates, progress to sold out", runStatus, true},
		{"user", "a user's claims and standing across promotions", runUser, true},
		{"report", "the summary of a drop: claims, refusals, sold-out time, claims/s, issue lag", runReport, true},
		{"migrate", "apply the database schema and exit", runMigrate, false},
		{"version", "print the version, the commit and the build date", runVersion, false},
	}
}

// Exit codes of the commands that operate a running server.
const (
	exitOK          = 0 // done
	exitProblem     = 1 // the server said no (a problem), or the command failed otherwise
	exitUsage       = 2 // bad command line
	exitUnreachable = 3 // the server could not be reached, or gave no answer
)

// errUsage marks an error already reported with usage text.
var errUsage = errors.New("usage")

// usageError is a bad command line that run reports, as one line, and
// exits 2 for.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// Is makes a usageError an errUsage.
func (e usageError) Is(target error) bool { return target == errUsage }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

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
			var ue usageError
			if errors.As(err, &ue) {
				fmt.Fprintf(stderr, "dibs %s: %s\n", c.name, ue.msg)
			}
			return exitUsage
		case c.ops:
			return exitOps(err, stderr)
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

// exitOps reports err of an operations command as one line, "dibs: <code>:
// <detail>", with " (request_id <id>)" when the server named the request
// (its log lines carry the id), and returns its exit code: exitProblem for the server's
// problems (and failures of the command's own), exitUnreachable when no
// answer came.
func exitOps(err error, stderr io.Writer) int {
	var p *client.Problem
	var re *client.RequestError
	code := exitProblem
	msg := err.Error()
	switch {
	case errors.As(err, &p):
		msg = p.Error()
		if p.RequestID != "" {
			msg += " (request_id " + p.RequestID + ")"
		}
	case errors.Is(err, context.Canceled):
		msg = "interrupted"
	case errors.As(err, &re):
		code = exitUnreachable
		msg = "unreachable: " + re.Error()
	}
	fmt.Fprintf(stderr, "dibs: %s\n", strings.Join(strings.Fields(msg), " "))
	return code
}

// envOr is the value of the environment variable name, or def when it is
// not set. Only for values that are no secret: they show in --help.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// DefaultServer is the server the operations commands talk to without
// --server or DIBS_SERVER: where dibs serve listens by default.
const DefaultServer = "http://" + service.DefaultAddr

// serverFlags are the flags every command that talks to a running server
// shares: --server, --admin-token and --json.
type serverFlags struct {
	server string
	token  string
	json   bool
}

// register defines --server, --admin-token and --json on fs.
func (f *serverFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.server, "server", envOr("DIBS_SERVER", DefaultServer), "base URL of the dibs server (env DIBS_SERVER)")
	fs.StringVar(&f.token, "admin-token", "", "admin bearer token; prefer the environment variable DIBS_ADMIN_TOKEN, as a flag shows in ps (env DIBS_ADMIN_TOKEN)")
	fs.BoolVar(&f.json, "json", false, "print the answer as one JSON document instead of a table")
}

// client returns a client of the server with the admin token of the flag,
// else of DIBS_ADMIN_TOKEN.
func (f *serverFlags) client() (*client.Client, error) {
	token := f.token
	if token == "" {
		token = os.Getenv("DIBS_ADMIN_TOKEN")
	}
	c, err := client.New(f.server, client.WithAdminToken(token), client.WithUserAgent("dibs-cli/"+buildinfo.Get().Version))
	if err != nil {
		return nil, usageErrorf("--server: %v", err)
	}
	return c, nil
}

// newOpsFlagSet returns the flag set of the command path (e.g. "promo
// create") with the server flags registered: its help starts with what,
// then the usage line, the lines of more, and the flags as --flag.
func newOpsFlagSet(path, args, what string, stderr io.Writer, more ...string) (*flag.FlagSet, *serverFlags) {
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "dibs %s: %s.\n\n", path, strings.TrimSuffix(what, "."))
		fmt.Fprintf(stderr, "Usage: dibs %s [flags]%s\n", path, args)
		if len(more) > 0 {
			fmt.Fprintln(stderr)
			for _, l := range more {
				fmt.Fprintln(stderr, l)
			}
		}
		printFlags(stderr, fs)
	}
	sf := new(serverFlags)
	sf.register(fs)
	return fs, sf
}

// parseArgs parses fs from args, flags and positional arguments in any
// order, and returns the positional ones; it wants between min and max of
// them (max < 0: any number). Failures are usage errors, reported with the
// usage text.
func parseArgs(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	switch {
	case len(pos) < min:
		fmt.Fprintf(fs.Output(), "dibs %s: missing argument\n\n", fs.Name())
	case max >= 0 && len(pos) > max:
		fmt.Fprintf(fs.Output(), "dibs %s: unexpected argument %q\n\n", fs.Name(), pos[max])
	default:
		return pos, nil
	}
	fs.Usage()
	return nil, errUsage
}

// subcommand is one verb of a command with verbs (dibs promo create).
type subcommand struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// runVerbs runs the verb args[0] of the command name.
func runVerbs(ctx context.Context, name string, verbs []subcommand, args []string, stdout, stderr io.Writer) error {
	usage := func() {
		if sum := summaryOf(name); sum != "" {
			fmt.Fprintf(stderr, "dibs %s: %s.\n\n", name, sum)
		}
		fmt.Fprintf(stderr, "Usage: dibs %s <verb> [flags] [arguments]\n\nVerbs:\n", name)
		for _, v := range verbs {
			fmt.Fprintf(stderr, "  %-8s %s\n", v.name, v.summary)
		}
		fmt.Fprintf(stderr, "\nRun 'dibs %s <verb> --help' for a verb's flags.\n", name)
	}
	if len(args) == 0 {
		usage()
		return errUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		return flag.ErrHelp
	}
	for _, v := range verbs {
		if v.name == args[0] {
			return v.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "dibs %s: unknown verb %q\n\n", name, args[0])
	usage()
	return errUsage
}

// writeJSON writes v to w as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// keyFlag defines --idempotency-key on fs and returns a function giving
// the request options it asks for.
func keyFlag(fs *flag.FlagSet) func() []client.RequestOption {
	key := fs.String("idempotency-key", "", "Idempotency-Key of the request: a retry with the same key and request changes nothing twice")
	return func() []client.RequestOption {
		if *key == "" {
			return nil
		}
		return []client.RequestOption{client.IdempotencyKey(*key)}
	}
}
