// Command claimcost measures what one claim costs the processes that serve
// it: the CPU time of the server process and of Redis per accepted claim,
// latency, and the Redis memory each claim leaves behind once issued. It has
// three subcommands:
//
//	claimcost floor -addr 127.0.0.1:0
//	    a bare net/http server that decodes the claim body as dibs does and
//	    answers a claim-shaped 202: the HTTP floor. It prints "listening
//	    ADDR" on standard output.
//	claimcost load -target URL -pid PID [-redis HOST:PORT] [-admin-token T]
//	    [-n 50000] [-c 64] [-rate 0] [-prefix dibs:]
//	    posts n claims for new users, c in flight (paced to rate claims/s
//	    when rate > 0), reads the CPU time of process PID from /proc and of
//	    Redis from INFO cpu before and after, and prints one JSON line. With
//	    an admin token it first creates a promotion, and after the claims
//	    waits until every accepted claim is issued and the work stream is
//	    trimmed, so the CPU and memory of issuance are counted too. With
//	    -sold-out the promotion's only unit is taken first, and the figures
//	    are per rejection (sold_out).
//	claimcost chart -out FILE.svg < rows.tsv
//	    writes a horizontal bar chart (SVG) of the rows "label<TAB>value"
//	    read from standard input; a first line "# title<TAB>unit" names it.
//
// scripts/bench-claim.sh runs it against `dibs serve` and against the floor
// in the same rounds.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: claimcost floor|load|chart [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "floor":
		err = floor(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	case "chart":
		err = chart(os.Args[2:], os.Stdin)
	default:
		err = fmt.Errorf("unknown subcommand %q (floor, load or chart)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "claimcost:", err)
		os.Exit(1)
	}
}
