// Command claimcost measures what one claim costs the processes that serve
// it: the CPU time of the server process and of Redis per accepted claim,
// latency, and the Redis memory each claim leaves behind once issued. Its
// subcommands:
//
//	claimcost floor -addr 127.0.0.1:0
//	    a bare net/http server that decodes the claim body as dibs does and
//	    answers a claim-shaped 202: the HTTP floor. It prints "listening
//	    ADDR" on standard output.
//	claimcost load -target URL -pid PID [-redis HOST:PORT[,HOST:PORT...]]
//	    [-admin-token T] [-n 50000] [-c 64] [-rate 0] [-duration 0]
//	    [-segments 0] [-slowlog 0] [-prefix dibs:] [-label L] [-role R]
//	    posts claims for new users and prints one JSON line. Closed loop
//	    (-rate 0): c connections, each sending its next claim when the last
//	    is answered, n claims or for -duration. Open loop (-rate > 0): claims
//	    due at t0 + i/rate, sent by a pool of c workers, each timed from when
//	    it was due (bench/openloop). It reads the CPU time of process PID
//	    from /proc and of each Redis node from INFO cpu before and after.
//	    With an admin token it first creates a promotion, and after the
//	    claims waits until every accepted claim is issued (and, with one
//	    Redis, the work stream trimmed), so the CPU and memory of issuance
//	    are counted too. With -sold-out the promotion's only unit is taken
//	    first, and the figures are per rejection. -slowlog 500us counts the
//	    Redis SLOWLOG entries slower than that, per command. -stall-db
//	    sqlite://PATH (or postgres://…) -stall-at 25s -stall-for 10s holds
//	    the server's database from outside it in the middle of the run (the
//	    file's write lock; the issued table's lock), and -watch 1s (implied
//	    by the stall) samples /metrics: the journal's drops and peaks, the
//	    backlog's peak and how long after the stall it was back to its level
//	    before (-watch-file FILE keeps every sample).
//	claimcost room -target URL -pid PID -redis HOST:PORT -admin-token T
//	    [-n 10000] [-c 256] [-dialers 64] [-readers 8] [-idle 24s]
//	    [-lookups 10s] [-pause=true] [-json FILE] [-note TEXT]
//	    measures a waiting room on one instance (Linux): it creates a
//	    promotion with a room (paused, so the line stands still), joins n
//	    users (joins/s, Redis used_memory per waiting user), holds an event
//	    stream of each open from a few epoll readers, the streams dialed
//	    from 127.0.0.2 … 127.0.0.255 (raise ulimit -n above n for it and
//	    the server), measures them idle (Redis and server CPU per stream
//	    and second, server heap per stream), times a hint (a new message
//	    for the room) until every stream shows it, then runs status lookups
//	    (lookups/s, Redis commands per lookup). It prints the rows of the
//	    bundle's waiting-room table and appends a JSON line to -json.
//	claimcost redis -addr HOST:PORT [-wait 5s] COMMAND [ARGS...]
//	    runs one Redis command and prints its answer (no redis-cli needed).
//	claimcost cluster -addrs A,B,C
//	    forms a Redis Cluster of masters from empty cluster-enabled nodes.
//	claimcost get FILE MEMBER
//	    prints a member of the last JSON line of FILE.
//	claimcost table [-dibs-cores N] [-load-cores N] FILE
//	    prints the Markdown table of the runs in FILE (JSON lines of load)
//	    and the model of where the maximum comes from.
//	perf script -F ip,sym -i perf.data | claimcost split -us US [-under RE]
//	    splits the CPU of a `perf record -g -p PID` of dibs serve under
//	    load into the request path, the Redis client, the issuance, the
//	    garbage collector and the scheduler, in µs per claim (the samples
//	    scaled to US, the server CPU per claim load measured); -under RE
//	    also lists the functions under the frames RE matches.
//	claimcost chart -out FILE.svg < rows.tsv
//	    writes a horizontal bar chart (SVG) of the rows "label<TAB>value"
//	    read from standard input; a first line "# title<TAB>unit" names it.
//
// scripts/bench-claim.sh runs it against `dibs serve` and against the floor
// in the same rounds; scripts/bench-bundle.sh, the script of the benchmark
// bundle (make bench-bundle), runs all of it pinned to cores.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: claimcost floor|load|room|redis|cluster|get|table|split|chart [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "floor":
		err = floor(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	case "redis":
		err = redisCmd(os.Args[2:], os.Stdout)
	case "cluster":
		err = clusterCmd(os.Args[2:])
	case "get":
		err = getCmd(os.Args[2:], os.Stdout)
	case "table":
		err = tableCmd(os.Args[2:], os.Stdout)
	case "room":
		err = roomCmd(os.Args[2:], os.Stdout)
	case "split":
		err = splitCmd(os.Args[2:], os.Stdin, os.Stdout)
	case "chart":
		err = chart(os.Args[2:], os.Stdin)
	default:
		err = fmt.Errorf("unknown subcommand %q (floor, load, room, redis, cluster, get, table, split or chart)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "claimcost:", err)
		os.Exit(1)
	}
}
