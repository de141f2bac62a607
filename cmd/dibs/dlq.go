package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/dibsio/dibs/client"
)

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runVerbs(ctx, "dlq", []subcommand{
		{"list", "list a promotion's dead letters", runDLQList},
		{"replay", "put dead letters back into the pipeline under the same claim ids", runDLQReplay},
		{"void", "give up on dead letters and return their units to stock", runDLQVoid},
	}, args, stdout, stderr)
}

func runDLQList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, sf := newOpsFlagSet("dlq list", " PROMOTION", "list a promotion's dead letters", stderr,
		"Lists every dead letter of the promotion (all pages). With --json it prints one",
		"JSON array of dead-letter objects.")
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return err
	}
	c, err := sf.client()
	if err != nil {
		return err
	}
	list := []client.DeadLetter{}
	for d, err := range c.DeadLetters(ctx, pos[0]) {
		if err != nil {
			return err
		}
		list = append(list, d)
	}
	if sf.json {
		return writeJSON(stdout, list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLAIM ID\tUSER\tDELIVERIES\tAT\tREASON")
	for _, d := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", d.ClaimID, d.UserID, d.Deliveries, d.At.UTC().Format(time.RFC3339), oneLine(d.Reason))
	}
	return tw.Flush()
}

func runDLQReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return dlqAction(ctx, "replay", "put dead letters back into the pipeline under the same claim ids", "replayed", args, stdout, stderr,
		(*client.Client).ReplayDeadLetters)
}

func runDLQVoid(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return dlqAction(ctx, "void", "give up on dead letters and return their units to stock", "voided", args, stdout, stderr,
		(*client.Client).VoidDeadLetters)
}

// dlqAction runs replay or void on the claim ids given (replay: or --all)
// and prints how many the server acted on, as {"<done>": N} with --json.
func dlqAction(ctx context.Context, verb, what, done string, args []string, stdout, stderr io.Writer,
	call func(c *client.Client, ctx context.Context, promotion string, ids []string, opts ...client.RequestOption) (int, error)) error {
	more := []string{"Acts on the claim ids given. Safe to run twice: a claim already " + done + " is not counted again."}
	if verb == "replay" {
		more = append(more, "--all replays every dead letter of the promotion.")
	}
	fs, sf := newOpsFlagSet("dlq "+verb, " PROMOTION [CLAIM_ID...]", what, stderr, more...)
	opts := keyFlag(fs)
	var all bool
	if verb == "replay" {
		fs.BoolVar(&all, "all", false, "replay every dead letter of the promotion")
	}
	pos, err := parseArgs(fs, args, 1, -1)
	if err != nil {
		return err
	}
	ids := pos[1:]
	switch {
	case all && len(ids) > 0:
		return usageErrorf("give claim ids or --all, not both")
	case !all && len(ids) == 0:
		if verb == "replay" {
			return usageErrorf("give the claim ids to replay, or --all")
		}
		return usageErrorf("give the claim ids to %s", verb)
	}
	c, err := sf.client()
	if err != nil {
		return err
	}
	if all {
		ids = nil // the client's "all"
	}
	n, err := call(c, ctx, pos[0], ids, opts()...)
	if err != nil {
		return err
	}
	if sf.json {
		return writeJSON(stdout, map[string]int{done: n})
	}
	fmt.Fprintf(stdout, "%s %d\n", done, n)
	return nil
}
