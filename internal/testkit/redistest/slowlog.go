package redistest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

// Logged is one command a server ran, as its SLOWLOG keeps it: the first
// arguments (the command's name first; Redis keeps up to 32) and how many
// arguments the command had in all.
type Logged struct {
	Args []string
	Argc int
}

// LogEveryCommand makes the server behind c log every command it runs in
// its SLOWLOG (up to max of them), from now on. The setting is the
// server's: use it on a Fresh server of the test's own. Redis 7 logs the
// commands a script runs as well as the script's call.
func LogEveryCommand(tb testing.TB, c rueidis.Client, max int) {
	tb.Helper()
	ctx := context.Background()
	for _, cmd := range []rueidis.Completed{
		c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-max-len", fmt.Sprint(max)).Build(),
		c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "0").Build(),
		c.B().SlowlogReset().Build(),
	} {
		if err := c.Do(ctx, cmd).Error(); err != nil {
			tb.Fatalf("redistest: log every command: %v", err)
		}
	}
}

// LoggedCommands returns the commands the server behind c logged since
// LogEveryCommand, oldest first.
func LoggedCommands(tb testing.TB, c rueidis.Client) []Logged {
	tb.Helper()
	entries, err := c.Do(context.Background(), c.B().SlowlogGet().Count(-1).Build()).ToArray()
	if err != nil {
		tb.Fatalf("redistest: SLOWLOG GET: %v", err)
	}
	out := make([]Logged, 0, len(entries))
	for _, e := range entries {
		fields, err := e.ToArray()
		if err != nil || len(fields) < 4 {
			tb.Fatalf("redistest: SLOWLOG entry: %v", err)
		}
		args, err := fields[3].AsStrSlice()
		if err != nil {
			tb.Fatalf("redistest: SLOWLOG arguments: %v", err)
		}
		l := Logged{Args: args, Argc: len(args)}
		// A command with more than 32 arguments ends "... (N more arguments)".
		if n := len(args); n > 0 {
			var more int
			if _, err := fmt.Sscanf(args[n-1], "... (%d more arguments)", &more); err == nil {
				l.Args, l.Argc = args[:n-1], n-1+more
			}
		}
		out = append(out, l)
	}
	slices.Reverse(out)
	return out
}

// Name returns the command's name in capitals.
func (l Logged) Name() string {
	if len(l.Args) == 0 {
		return ""
	}
	return strings.ToUpper(l.Args[0])
}
