#!/usr/bin/env bash
# bench-claim.sh measures claim throughput at every layer on this machine, in
# one run, so the figures can be compared with each other:
#
#   1. redis-benchmark running the exact claim Lua script (EVALSHA, a random
#      user per call, so every call takes the accept path): what one Redis
#      server can do at all, the physical limit;
#   2. BenchmarkClaim: the Go library, Gate.Claim;
#   3. BenchmarkHTTPClaim: POST /v1/promotions/{id}/claims through the real
#      handler, manager and issuer on an httptest server;
#      then BenchmarkClaimSegments: one promotion split into 1 and into 3
#      segments on a local 3-master Cluster, with the busiest master's
#      Redis CPU per claim;
#   4. `dibs bench` against `dibs serve` on the embedded default: the whole
#      product end to end, until every accepted claim is issued;
#   5. the claim cost: bench/claimcost against `dibs serve` (on this script's
#      redis-server, SQLite) and against a bare net/http floor server, each
#      in its own process: server CPU and Redis CPU per accepted claim,
#      issuance included, Redis commands and memory per claim once issued,
#      sold-out rejections, and latency at half the measured throughput;
#   6. the stream runtime against watermill-redisstream (bench/watermill).
#
# The figures of step 5 are also drawn as an SVG bar chart (CHART).
#
# Steps 1-3 run in rounds (one of each per round) so background load on a
# shared machine hits all of them alike; the table reports the median.
#
# Environment (all optional):
#   RUNS=3            rounds of steps 1-3 and runs of step 4
#   REQUESTS=200000   redis-benchmark requests per run
#   CLIENTS=50        redis-benchmark connections
#   PIPELINE=16       pipelining of the second redis-benchmark run of each
#                     round, the ceiling when calls share round trips as
#                     they do in the Go client; 0 skips it
#   BENCHTIME=2s      -benchtime of the Go benchmarks
#   E2E_USERS=100000  users (and stock) of each `dibs bench` run; 0 skips step 4
#   REDIS_PORT=       use the redis-server already listening on this loopback
#                     port for step 1 instead of starting one (it gets keys
#                     under the prefix dibsbench:)
#   COST_CLAIMS=50000 claims of each step-5 run; 0 skips step 5
#   SEGMENTS=1        0 skips the segments run (1 vs 3 segments of one
#                     promotion on a local 3-master Cluster)
#   COST_PG=0         1 also runs step 5 with dibs serve on PostgreSQL (a
#                     private server this script starts; its CPU per claim is
#                     reported beside dibs's), which needs PostgreSQL's
#                     binaries (make deps)
#   WATERMILL=1       0 skips step 6
#   CHART=            write the step-5 chart to this SVG file
#   OUT=              also write the final table to this file
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)

RUNS=${RUNS:-3}
REQUESTS=${REQUESTS:-200000}
CLIENTS=${CLIENTS:-50}
PIPELINE=${PIPELINE:-16}
BENCHTIME=${BENCHTIME:-2s}
E2E_USERS=${E2E_USERS:-100000}
REDIS_PORT=${REDIS_PORT:-}
OUT=${OUT:-}
COST_CLAIMS=${COST_CLAIMS:-50000}
COST_PG=${COST_PG:-0}
SEGMENTS=${SEGMENTS:-1}
WATERMILL=${WATERMILL:-1}
CHART=${CHART:-}
GO=${GO:-go}

for tool in redis-server redis-cli redis-benchmark "$GO" timeout; do
	command -v "$tool" >/dev/null || { echo "bench-claim: $tool not found (make deps installs Redis)" >&2; exit 1; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/dibs-bench.XXXXXX")
REDIS_PID=""
SERVE_PID=""
FLOOR_PID=""
PG_DATA=""
PG_CTL=""
PG_USER=""

# stop ends a child we started: SIGTERM, up to 30 s to exit, then SIGKILL.
stop() {
	local pid=$1
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 300); do
		kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}
cleanup() {
	stop "$SERVE_PID"
	stop "$FLOOR_PID"
	stop "$REDIS_PID"
	if [ -n "$PG_DATA" ]; then
		runuser -u "$PG_USER" -- "$PG_CTL" -D "$PG_DATA" -m fast -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '== %s\n' "$*" >&2; }

# median prints the median of the numbers on standard input.
median() {
	sort -g | awk '{v[NR] = $1} END {
		if (NR == 0) { print "n/a"; exit }
		if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ---------------------------------------------------------------- machine
CPU=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || echo unknown)
REDIS_VERSION=$(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')
log "machine: $(nproc) CPUs ($CPU), Redis $REDIS_VERSION, $($GO version | cut -d' ' -f3)"

# ---------------------------------------------------------------- build
log "building the benchmark binaries and bin/dibs into $TMP"
timeout 600 "$GO" test -c -o "$TMP/claim.test" ./claim
timeout 600 "$GO" test -c -o "$TMP/httpapi.test" ./httpapi
timeout 600 "$GO" build -o "$TMP/dibs" ./cmd/dibs
timeout 600 "$GO" build -o "$TMP/claimcost" ./bench/claimcost

# The setup program opens a promotion with the gate itself (so the meta
# hash, the stream and its group are exactly what the service writes), loads
# the claim script from claim.ClaimScriptSource and prints its SHA-1 and the
# script's keys in order. It is built in the module, outside the tree.
mkdir -p "$TMP/setup"
cat >"$TMP/setup/main.go" <<'EOF'
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/dibsio/dibs/claim"
)

func main() {
	addr, prefix, id := os.Args[1], os.Args[2], os.Args[3]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	now := time.Now()
	// A per-user limit far above one: a user that __rand_int__ happens to
	// draw twice is accepted again, so every call takes the accept path.
	gate, err := claim.New(c, claim.Config{Prefix: prefix})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, err = gate.Open(ctx, claim.Promotion{
		ID: id, Stock: 1_000_000_000, PerUserLimit: 1_000_000,
		StartsAt: now.Add(-time.Minute), EndsAt: now.Add(24 * time.Hour),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sha, err := c.Do(ctx, c.B().ScriptLoad().Script(claim.ClaimScriptSource()).Build()).ToString()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(sha, strings.Join(claim.ClaimScriptKeys(prefix, id), " "))
}
EOF
timeout 600 "$GO" build -o "$TMP/setup/setup" "$TMP/setup/main.go"

# ---------------------------------------------------------------- redis
# start_redis starts a redis-server like the tests' (no persistence) on a
# free loopback port and sets REDIS_PID and REDIS_PORT.
start_redis() {
	mkdir -p "$TMP/redis"
	for _ in $(seq 20); do
		local port=$((20000 + RANDOM % 20000))
		redis-server --port "$port" --bind 127.0.0.1 --protected-mode yes --daemonize no \
			--dir "$TMP/redis" --save '' --appendonly no --logfile "$TMP/redis.log" &
		REDIS_PID=$!
		for _ in $(seq 50); do
			if redis-cli -p "$port" ping >/dev/null 2>&1; then
				REDIS_PORT=$port
				return 0
			fi
			kill -0 "$REDIS_PID" 2>/dev/null || break # port taken: try another
			sleep 0.1
		done
		stop "$REDIS_PID"
		REDIS_PID=""
	done
	echo "bench-claim: could not start redis-server" >&2
	exit 1
}
if [ -z "$REDIS_PORT" ]; then
	start_redis
	log "redis-server $REDIS_VERSION on 127.0.0.1:$REDIS_PORT (no persistence, like the Go benchmarks' server)"
else
	redis-cli -p "$REDIS_PORT" ping >/dev/null || { echo "bench-claim: nothing answers on port $REDIS_PORT" >&2; exit 1; }
	log "using the redis-server on 127.0.0.1:$REDIS_PORT"
fi

# ---------------------------------------------------------------- rounds
# redis_cpu prints the CPU seconds the redis-server has used so far.
redis_cpu() {
	redis-cli -p "$REDIS_PORT" INFO cpu | tr -d '\r' |
		awk -F: '$1 == "used_cpu_sys" || $1 == "used_cpu_user" { t += $2 } END { printf "%.6f", t }'
}

# redis_round runs redis-benchmark once on a fresh promotion, with
# pipelining $2 (1: none), and prints "rps redis_us_per_claim p50_ms p99_ms".
# It checks that every call was accepted.
redis_round() {
	local round=$1 pipeline=$2 id="limit$1p$2" prefix="dibsbench:"
	local setup sha keys csv rps p50 p99 seq cpu0 cpu1
	setup=$("$TMP/setup/setup" "127.0.0.1:$REDIS_PORT" "$prefix" "$id")
	sha=${setup%% *}
	keys=${setup#* }
	cpu0=$(redis_cpu)
	# shellcheck disable=SC2086 # the script's keys are meant to split
	csv=$(timeout 600 redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c "$CLIENTS" -n "$REQUESTS" \
		-P "$pipeline" -r 100000000 --csv EVALSHA "$sha" "$(wc -w <<<"$keys")" $keys 'user:__rand_int__' '' "$id" | tail -n 1)
	cpu1=$(redis_cpu)
	IFS=, read -r _ rps _ _ p50 _ p99 _ <<<"$(tr -d '"' <<<"$csv")"
	seq=$(redis-cli -p "$REDIS_PORT" GET "${prefix}{$id}:seq")
	if [ "$seq" != "$REQUESTS" ]; then
		echo "bench-claim: redis-benchmark round $round accepted $seq of $REQUESTS claims" >&2
		exit 1
	fi
	# shellcheck disable=SC2086
	redis-cli -p "$REDIS_PORT" DEL $keys >/dev/null
	echo "$rps $(awk -v a="$cpu0" -v b="$cpu1" -v n="$REQUESTS" 'BEGIN { printf "%.1f", (b - a) * 1e6 / n }') $p50 $p99"
}

# go_round runs one Go benchmark binary once and prints its claims/s, CPU
# µs per claim of the benchmark process and of Redis ("-" when not reported).
go_round() {
	local bin=$1 pkg=$2 pattern=$3 out line
	out=$(cd "$ROOT/$pkg" && timeout 600 "$bin" -test.run '^$' -test.bench "$pattern" \
		-test.benchtime "$BENCHTIME" -test.count 1 2>&1) || { echo "$out" >&2; exit 1; }
	echo "$out" >>"$TMP/go-bench.txt"
	line=$(awk '/claims\/s/ {
		rate = "-"; cpu = "-"; red = "-"
		for (i = 2; i <= NF; i++) {
			if ($i == "claims/s") rate = $(i - 1)
			if ($i == "cpu-µs/claim") cpu = $(i - 1)
			if ($i == "redis-µs/claim") red = $(i - 1)
		}
		print rate, cpu, red }' <<<"$out" | tail -n 1)
	[ -n "$line" ] || { echo "$out" >&2; echo "bench-claim: no claims/s in $pkg output" >&2; exit 1; }
	echo "$line"
}

: >"$TMP/redis.txt"
: >"$TMP/redis-pipelined.txt"
: >"$TMP/lib.txt"
: >"$TMP/http.txt"
: >"$TMP/floor.txt"
for round in $(seq "$RUNS"); do
	r=$(redis_round "$round" 1)
	echo "$r" >>"$TMP/redis.txt"
	if [ "$PIPELINE" -gt 1 ]; then
		redis_round "$round" "$PIPELINE" >>"$TMP/redis-pipelined.txt"
	fi
	l=$(go_round "$TMP/claim.test" claim 'BenchmarkClaim/single/compact$')
	echo "$l" >>"$TMP/lib.txt"
	h=$(go_round "$TMP/httpapi.test" httpapi 'BenchmarkHTTPClaim')
	echo "$h" >>"$TMP/http.txt"
	f=$(go_round "$TMP/httpapi.test" httpapi 'BenchmarkHTTPFloor')
	echo "$f" >>"$TMP/floor.txt"
	log "round $round/$RUNS: redis-benchmark ${r%% *}/s, Gate.Claim ${l%% *}/s, HTTP ${h%% *}/s, bare HTTP ${f%% *}/s"
done

# ---------------------------------------------------------------- segments
# BenchmarkClaimSegments on a local 3-master Cluster: pipelined claims of one
# promotion split into 1 and 3 segments, and the Redis CPU per claim of the
# busiest master (which bounds the promotion's rate). segments.txt keeps, per
# round and segment count, "segments claims/s top_master_us".
: >"$TMP/segments.txt"
if [ "$SEGMENTS" = 1 ]; then
	for round in $(seq "$RUNS"); do
		out=$(cd "$ROOT/claim" && timeout 600 "$TMP/claim.test" -test.run '^$' -test.bench 'BenchmarkClaimSegments' \
			-test.benchtime "$BENCHTIME" -test.count 1 2>&1) || { echo "$out" >&2; exit 1; }
		echo "$out" >>"$TMP/go-bench.txt"
		awk '/segments=[0-9]+/ && /claims\/s/ {
			n = $1; sub(/.*segments=/, "", n); sub(/-[0-9]+$/, "", n)
			rate = "-"; top = "-"
			for (i = 2; i <= NF; i++) {
				if ($i == "claims/s") rate = $(i - 1)
				if ($i == "top-master-µs/claim") top = $(i - 1)
			}
			print n, rate, top }' <<<"$out" >>"$TMP/segments.txt"
		log "segments round $round/$RUNS: $(tail -n 2 "$TMP/segments.txt" | awk '{ printf "%s%s segments %.0f claims/s", (NR > 1 ? ", " : ""), $1, $2 }')"
	done
fi

# ---------------------------------------------------------------- end to end
: >"$TMP/e2e.txt"
if [ "$E2E_USERS" -gt 0 ]; then
	token=bench-$RANDOM$RANDOM
	mkdir -p "$TMP/serve"
	"$TMP/dibs" serve --addr 127.0.0.1:0 --db "sqlite://$TMP/serve/dibs.db" --data-dir "$TMP/serve/redis" \
		--admin-token "$token" --log-format json 2>"$TMP/serve.log" &
	SERVE_PID=$!
	addr=""
	for _ in $(seq 300); do
		addr=$(jq -r 'select(.msg == "listening") | .addr' "$TMP/serve.log" 2>/dev/null | head -n 1)
		[ -n "$addr" ] && break
		kill -0 "$SERVE_PID" 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$addr" ]; then
		cat "$TMP/serve.log" >&2
		echo "bench-claim: dibs serve did not start" >&2
		exit 1
	fi
	log "dibs serve on $addr (embedded default: private redis-server with appendfsync everysec, SQLite)"
	for run in $(seq "$RUNS"); do
		timeout 900 "$TMP/dibs" bench --target "http://$addr" --admin-token "$token" \
			--stock "$E2E_USERS" --users "$E2E_USERS" --concurrency 64 --json >"$TMP/e2e-$run.json" 2>"$TMP/e2e-$run.log" || { cat "$TMP/e2e-$run.log" "$TMP/e2e-$run.json" >&2; exit 1; }
		jq -e '.ok' "$TMP/e2e-$run.json" >/dev/null || { cat "$TMP/e2e-$run.json" >&2; echo "bench-claim: dibs bench checks failed" >&2; exit 1; }
		jq -r '[.claims_per_second, "-", "-", .latency_ms.p50, .latency_ms.p99, .all_issued_after_ms] | join(" ")' \
			"$TMP/e2e-$run.json" >>"$TMP/e2e.txt"
		log "dibs bench run $run/$RUNS: $(tail -n 1 "$TMP/e2e.txt" | cut -d' ' -f1) claims/s"
	done
	stop "$SERVE_PID"
	SERVE_PID=""
fi

# ---------------------------------------------------------------- claim cost
# Each run of claimcost prints one JSON line; cost.txt keeps, per round,
# "floor_us dibs_us redis_us commands memory rate p50 p99" and soldout.txt
# "rejections/s dibs_us redis_us commands".
: >"$TMP/cost.txt"
: >"$TMP/soldout.txt"
: >"$TMP/half.txt"
if [ "$COST_CLAIMS" -gt 0 ]; then
	token=cost-$RANDOM$RANDOM
	mkdir -p "$TMP/cost"
	"$TMP/dibs" serve --addr 127.0.0.1:0 --db "sqlite://$TMP/cost/dibs.db" --redis "127.0.0.1:$REDIS_PORT" \
		--admin-token "$token" --log-format json 2>"$TMP/cost-serve.log" &
	SERVE_PID=$!
	"$TMP/claimcost" floor >"$TMP/floor.addr" &
	FLOOR_PID=$!
	addr="" faddr=""
	for _ in $(seq 300); do
		addr=$(jq -r 'select(.msg == "listening") | .addr' "$TMP/cost-serve.log" 2>/dev/null | head -n 1)
		faddr=$(awk '{print $2}' "$TMP/floor.addr")
		[ -n "$addr" ] && [ -n "$faddr" ] && break
		sleep 0.1
	done
	[ -n "$addr" ] && [ -n "$faddr" ] || { cat "$TMP/cost-serve.log" >&2; echo "bench-claim: servers for the claim cost did not start" >&2; exit 1; }
	for round in $(seq "$RUNS"); do
		f=$(timeout 900 "$TMP/claimcost" load -target "http://$faddr" -pid "$FLOOR_PID" -n "$COST_CLAIMS")
		d=$(timeout 900 "$TMP/claimcost" load -target "http://$addr" -pid "$SERVE_PID" -redis "127.0.0.1:$REDIS_PORT" \
			-admin-token "$token" -n "$COST_CLAIMS")
		o=$(timeout 900 "$TMP/claimcost" load -target "http://$addr" -pid "$SERVE_PID" -redis "127.0.0.1:$REDIS_PORT" \
			-admin-token "$token" -n "$COST_CLAIMS" -sold-out)
		echo "$(jq -r .server_cpu_us_per_claim <<<"$f") $(jq -r '[.server_cpu_us_per_claim, .redis_cpu_us_per_claim, .redis_commands_per_claim, .redis_memory_bytes_per_claim, .claims_per_second, .p50_ms, .p99_ms] | join(" ")' <<<"$d")" >>"$TMP/cost.txt"
		jq -r '[.claims_per_second, .server_cpu_us_per_claim, .redis_cpu_us_per_claim, .redis_commands_per_claim] | join(" ")' <<<"$o" >>"$TMP/soldout.txt"
		echo "$d" >>"$TMP/cost.json"
		log "claim cost round $round/$RUNS: floor $(cut -d' ' -f1 <<<"$(tail -n 1 "$TMP/cost.txt")") µs, dibs $(cut -d' ' -f2,3 <<<"$(tail -n 1 "$TMP/cost.txt")") µs (Go, Redis)"
	done
	# Latency with the issuer running, at half the median throughput.
	half=$(awk '{print $6}' "$TMP/cost.txt" | median | awk '{printf "%.0f", $1 / 2}')
	for round in $(seq "$RUNS"); do
		timeout 900 "$TMP/claimcost" load -target "http://$addr" -pid "$SERVE_PID" -redis "127.0.0.1:$REDIS_PORT" \
			-admin-token "$token" -n "$COST_CLAIMS" -rate "$half" | jq -r '[.claims_per_second, .p50_ms, .p99_ms] | join(" ")' >>"$TMP/half.txt"
	done
	stop "$SERVE_PID"
	SERVE_PID=""
	stop "$FLOOR_PID"
	FLOOR_PID=""
fi

# The claim cost again with dibs serve on PostgreSQL: a private server with
# its default settings, run as an unprivileged user (PostgreSQL refuses
# root). pgcost.txt keeps, per round, "dibs_us postgres_us redis_us p99".
: >"$TMP/pgcost.txt"
if [ "$COST_CLAIMS" -gt 0 ] && [ "$COST_PG" = 1 ]; then
	bin=$(dirname "$(command -v initdb 2>/dev/null || echo /none/initdb)")
	[ -x "$bin/initdb" ] || bin=$(ls -1d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV | head -n 1)
	[ -x "$bin/initdb" ] || { echo "bench-claim: COST_PG=1 needs PostgreSQL (make deps installs it)" >&2; exit 1; }
	PG_CTL=$bin/pg_ctl
	PG_USER=$(id -un)
	if [ "$(id -u)" = 0 ]; then
		PG_USER=postgres
		id postgres >/dev/null 2>&1 || PG_USER=nobody
	fi
	PG_DATA=$TMP/pg
	mkdir -p "$PG_DATA" && chown "$PG_USER" "$PG_DATA" && chmod 700 "$PG_DATA"
	chmod 755 "$TMP"
	runuser -u "$PG_USER" -- "$bin/initdb" -D "$PG_DATA" -U postgres -A trust >/dev/null
	# A random port; one that is taken fails the start, and the next is tried.
	pgport=""
	for _ in 1 2 3 4 5; do
		p=$((20000 + RANDOM % 20000))
		if runuser -u "$PG_USER" -- "$PG_CTL" -D "$PG_DATA" -l "$PG_DATA/log" -w \
			-o "-c listen_addresses=127.0.0.1 -c port=$p -c unix_socket_directories=$PG_DATA" start >/dev/null; then
			pgport=$p
			break
		fi
	done
	[ -n "$pgport" ] || { cat "$PG_DATA/log" >&2; echo "bench-claim: PostgreSQL did not start" >&2; exit 1; }
	token=pgcost-$RANDOM$RANDOM
	"$TMP/dibs" serve --addr 127.0.0.1:0 --db "postgres://postgres@127.0.0.1:$pgport/postgres?sslmode=disable" \
		--redis "127.0.0.1:$REDIS_PORT" --admin-token "$token" --log-format json 2>"$TMP/pg-serve.log" &
	SERVE_PID=$!
	addr=""
	for _ in $(seq 300); do
		addr=$(jq -r 'select(.msg == "listening") | .addr' "$TMP/pg-serve.log" 2>/dev/null | head -n 1)
		[ -n "$addr" ] && break
		sleep 0.1
	done
	[ -n "$addr" ] || { cat "$TMP/pg-serve.log" >&2; echo "bench-claim: dibs serve on PostgreSQL did not start" >&2; exit 1; }
	for round in $(seq "$RUNS"); do
		d=$(timeout 900 "$TMP/claimcost" load -target "http://$addr" -pid "$SERVE_PID" -redis "127.0.0.1:$REDIS_PORT" \
			-admin-token "$token" -n "$COST_CLAIMS" -db-comm postgres)
		jq -r '[.server_cpu_us_per_claim, .db_cpu_us_per_claim, .redis_cpu_us_per_claim, .p99_ms] | join(" ")' <<<"$d" >>"$TMP/pgcost.txt"
		log "claim cost on PostgreSQL, round $round/$RUNS: dibs $(cut -d' ' -f1 <<<"$(tail -n 1 "$TMP/pgcost.txt")") µs, PostgreSQL $(cut -d' ' -f2 <<<"$(tail -n 1 "$TMP/pgcost.txt")") µs"
	done
	stop "$SERVE_PID"
	SERVE_PID=""
fi

# ---------------------------------------------------------------- watermill
: >"$TMP/watermill.txt"
if [ "$WATERMILL" = 1 ]; then
	log "stream runtime against watermill-redisstream (bench/watermill)"
	(cd "$ROOT/bench/watermill" && timeout 1800 "$GO" test -run '^$' -bench . -benchtime 100000x -count "$RUNS") >"$TMP/watermill-raw.txt" 2>&1 ||
		{ cat "$TMP/watermill-raw.txt" >&2; echo "bench-claim: watermill comparison failed; the table leaves it out" >&2; : >"$TMP/watermill-raw.txt"; }
	# A benchmark whose code logs while it runs has its figures printed on a
	# line of their own, after the log: such a line is named by the last
	# benchmark name seen.
	awk '$1 ~ /^Benchmark/ { name = $1; sub(/-[0-9]+$/, "", name) }
		/msgs\/s/ { for (i = 2; i <= NF; i++) if ($i == "msgs/s") print name, $(i - 1) }' \
		"$TMP/watermill-raw.txt" >"$TMP/watermill.txt"
fi

# ---------------------------------------------------------------- table
# col FILE N prints the median of column N of FILE ("-" if it has none).
col() {
	local m
	m=$(awk -v n="$2" '$n != "-" && $n != "" { print $n }' "$1" | median)
	[ "$m" = "n/a" ] && m="-"
	echo "$m"
}
# runs FILE prints column 1 of FILE as whole numbers, space-separated.
runs() { awk '{ printf "%s%.0f", (NR > 1 ? ", " : ""), $1 }' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
num() { awk -v v="$1" -v d="${2:-0}" 'BEGIN { if (v == "-") print v; else printf "%.*f", d, v }'; }
limit=$(col "$TMP/redis.txt" 1)
row() { # name file
	local rate
	rate=$(col "$2" 1)
	echo "| $1 | $(num "$rate") | $(ratio "$rate" "$limit") | $(num "$(col "$2" 2)" 1) | $(num "$(col "$2" 3)" 1) | $(runs "$2") |"
}
awk '{ print $1, "-", $2 }' "$TMP/redis.txt" >"$TMP/redis-cols.txt"
awk '{ print $1, "-", $2 }' "$TMP/redis-pipelined.txt" >"$TMP/redis-pipelined-cols.txt"
{
	echo "machine: $(nproc) CPUs ($CPU), Redis $REDIS_VERSION, $($GO version | cut -d' ' -f3); median of $RUNS runs"
	echo
	echo "| measurement | claims/s | × limit | Go CPU µs/claim | Redis CPU µs/claim | runs (claims/s) |"
	echo "| --- | ---: | ---: | ---: | ---: | --- |"
	row "redis-benchmark, claim script by EVALSHA, -c $CLIENTS, random users (the limit)" "$TMP/redis-cols.txt"
	if [ -s "$TMP/redis-pipelined.txt" ]; then
		row "redis-benchmark, the same with -P $PIPELINE (pipelined)" "$TMP/redis-pipelined-cols.txt"
	fi
	row "BenchmarkClaim/single/compact: Gate.Claim, 64 in flight" "$TMP/lib.txt"
	row "BenchmarkHTTPClaim: POST claims, 64 in flight, issuer running" "$TMP/http.txt"
	row "BenchmarkHTTPFloor: same client, handler that only answers 202" "$TMP/floor.txt"
	if [ -s "$TMP/e2e.txt" ]; then
		row "dibs bench → dibs serve (AOF everysec), $E2E_USERS users, 64 in flight" "$TMP/e2e.txt"
	fi
	echo
	echo "redis-benchmark latency: p50 $(col "$TMP/redis.txt" 3) ms, p99 $(col "$TMP/redis.txt" 4) ms"
	if [ -s "$TMP/e2e.txt" ]; then
		echo "dibs bench latency: p50 $(col "$TMP/e2e.txt" 4) ms, p99 $(col "$TMP/e2e.txt" 5) ms; every claim issued $(col "$TMP/e2e.txt" 6) ms after the last answer"
	fi
	if [ -s "$TMP/cost.txt" ]; then
		echo
		echo "Claim cost (separate processes; per accepted claim, issuance into SQLite included; $COST_CLAIMS claims, 64 in flight):"
		echo
		echo "| measurement | median | runs |"
		echo "| --- | ---: | --- |"
		crow() { echo "| $1 | $(num "$(col "$2" "$3")" "${4:-1}") | $(awk -v n="$3" '{ printf "%s%s", (NR > 1 ? " · " : ""), $n }' "$2") |"; }
		crow "HTTP floor server, CPU µs per request" "$TMP/cost.txt" 1
		crow "dibs serve, Go CPU µs per claim" "$TMP/cost.txt" 2
		echo "| dibs serve above the floor, µs per claim | $(awk '{print $2 - $1}' "$TMP/cost.txt" | median | xargs printf '%.1f') | $(awk '{ printf "%s%.1f", (NR > 1 ? " · " : ""), $2 - $1 }' "$TMP/cost.txt") |"
		crow "Redis CPU µs per claim" "$TMP/cost.txt" 3
		crow "Redis commands per claim" "$TMP/cost.txt" 4
		crow "Redis memory bytes per claim once issued" "$TMP/cost.txt" 5 0
		crow "claims/s" "$TMP/cost.txt" 6 0
		crow "p99 ms at full load" "$TMP/cost.txt" 8
		crow "claims/s at half the throughput" "$TMP/half.txt" 1 0
		crow "p99 ms at half the throughput" "$TMP/half.txt" 3
		crow "sold-out rejections/s" "$TMP/soldout.txt" 1 0
		crow "dibs serve, Go CPU µs per rejection" "$TMP/soldout.txt" 2
		crow "Redis CPU µs per rejection" "$TMP/soldout.txt" 3
		crow "Redis commands per rejection" "$TMP/soldout.txt" 4
		if [ -s "$TMP/pgcost.txt" ]; then
			crow "dibs serve on PostgreSQL, Go CPU µs per claim" "$TMP/pgcost.txt" 1
			echo "| … above the floor, µs per claim | $(paste -d' ' "$TMP/cost.txt" "$TMP/pgcost.txt" | awk '{print $9 - $1}' | median | xargs printf '%.1f') | $(paste -d' ' "$TMP/cost.txt" "$TMP/pgcost.txt" | awk '{ printf "%s%.1f", (NR > 1 ? " · " : ""), $9 - $1 }') |"
			crow "PostgreSQL CPU µs per claim (all its processes)" "$TMP/pgcost.txt" 2
			crow "Redis CPU µs per claim (PostgreSQL run)" "$TMP/pgcost.txt" 3
			crow "p99 ms at full load (PostgreSQL run)" "$TMP/pgcost.txt" 4
		fi
	fi
	if [ -s "$TMP/segments.txt" ]; then
		echo
		echo "One promotion on a local 3-master Cluster, pipelined Gate.ClaimSegmented (BenchmarkClaimSegments):"
		echo
		echo "| segments | claims/s (median) | busiest master's Redis CPU µs per claim (median) | runs (claims/s) |"
		echo "| ---: | ---: | ---: | --- |"
		for n in $(awk '{print $1}' "$TMP/segments.txt" | sort -n | uniq); do
			awk -v n="$n" '$1 == n { print $2, $3 }' "$TMP/segments.txt" >"$TMP/seg-one.txt"
			echo "| $n | $(num "$(col "$TMP/seg-one.txt" 1)") | $(num "$(col "$TMP/seg-one.txt" 2)" 1) | $(runs "$TMP/seg-one.txt") |"
		done
	fi
	if [ -s "$TMP/watermill.txt" ]; then
		echo
		echo "| stream consumer (bench/watermill) | entries/s (median) | runs |"
		echo "| --- | ---: | --- |"
		for name in $(awk '{print $1}' "$TMP/watermill.txt" | awk '!seen[$0]++'); do
			awk -v n="$name" '$1 == n { print $2 }' "$TMP/watermill.txt" >"$TMP/wm-one.txt"
			echo "| $name | $(num "$(median <"$TMP/wm-one.txt")") | $(awk '{ printf "%s%.0f", (NR > 1 ? " · " : ""), $1 }' "$TMP/wm-one.txt") |"
		done
	fi
} | tee "${OUT:-/dev/null}"

# ---------------------------------------------------------------- chart
if [ -n "$CHART" ] && [ -s "$TMP/cost.txt" ]; then
	{
		printf '# CPU per claim (median of %s runs)\tµs\n' "$RUNS"
		printf 'HTTP floor server\t%s\n' "$(col "$TMP/cost.txt" 1)"
		printf 'dibs serve: Go\t%s\n' "$(col "$TMP/cost.txt" 2)"
		printf 'dibs serve: Redis\t%s\n' "$(col "$TMP/cost.txt" 3)"
		printf 'redis-benchmark: claim script\t%s\n' "$(col "$TMP/redis.txt" 2)"
		[ -s "$TMP/redis-pipelined.txt" ] && printf 'redis-benchmark: claim script, -P %s\t%s\n' "$PIPELINE" "$(col "$TMP/redis-pipelined.txt" 2)"
		printf 'Gate.Claim: Go\t%s\n' "$(col "$TMP/lib.txt" 2)"
		printf 'Gate.Claim: Redis\t%s\n' "$(col "$TMP/lib.txt" 3)"
		printf 'sold-out rejection: Go\t%s\n' "$(col "$TMP/soldout.txt" 2)"
		printf 'sold-out rejection: Redis\t%s\n' "$(col "$TMP/soldout.txt" 3)"
	} | "$TMP/claimcost" chart -out "$CHART"
	log "chart written to $CHART"
fi
