#!/usr/bin/env bash
# The script of the benchmark bundle (make bench-bundle), run.sh in the
# tarball: it measures dibs on a big Linux machine that has no Go toolchain
# and no network, from the static binaries beside it (bin/dibs,
# bin/claimcost), with Redis, dibs and the load pinned to separate cores
# (taskset), and prints one Markdown table:
#
#   1. the maximum claims/s: closed loop, many connections, `dibs serve` on an
#      external redis-server (no persistence) and SQLite;
#   2. open-loop latency at 25, 50 and 80 % of that maximum (each claim timed
#      from when it was due), on the external Redis, then on the embedded
#      default as the README runs it (`dibs serve` with its own private
#      redis-server, AOF everysec) and on the bare HTTP floor server, all at
#      the same rates with the same generator;
#   3. Redis SLOWLOG entries over 500 µs, per command, during the 80 % runs;
#   4. the issuance lag: from the last answer until every accepted claim is
#      issued, read through the API;
#   5. one promotion in 1 and in 3 segments on a 3-master Cluster;
#   6. Redis, dibs and load CPU µs per claim, and the ceiling each implies;
#   7. the waiting room on one instance: joins/s, Redis memory per waiting
#      user, 100,000 idle event streams (Redis and dibs CPU, dibs heap per
#      stream), a hint's fan-out to all of them, status lookups/s.
#   8. (STALL=1) the journal through a database stall: a closed-loop run at
#      the maximum whose SQLite file is held (BEGIN IMMEDIATE from outside
#      dibs) for a while in its middle: the journal's drops and peak, the
#      backlog's peak, and how long after the stall the backlog was back.
#
# Core layout on 16 cores: Redis 1, dibs 6, load 8 (the Cluster part: three
# Redis masters on 3 cores, dibs 5, load 8). On fewer cores it is scaled down
# and the table says so; below 4 cores the parts share cores and the figures
# are crude.
#
# Usage (as root or not):
#   ./run.sh [--redis-server PATH] [--ld-library-path DIRS] [--db URL] [--out FILE]
#
#   --redis-server    the redis-server binary (default: redis/redis-server in
#                     the bundle when it was built with BUNDLE_REDIS=1, else
#                     redis-server from PATH) [REDIS_SERVER]
#   --ld-library-path where that binary's shared libraries are [REDIS_LD_LIBRARY_PATH]
#   --db              the database of every dibs run (default: a fresh SQLite
#                     file per run; postgres://... to measure PostgreSQL) [DB]
#   --out             also write the table to this file, and the raw results
#                     (one JSON line per run) to FILE.jsonl, the waiting
#                     room's to FILE.room.jsonl [OUT]
#
# Environment (all optional):
#   SMOKE=1           seconds-long run: tiny rates, 1 s per step (what make test runs)
#   DURATION=20       seconds of each open-loop run
#   MAX_DURATION=15   seconds of each closed-loop (maximum) run
#   CONNS=256         connections of the closed-loop runs
#   WORKERS=1024      senders of the open-loop runs (the most claims in flight)
#   ISSUE_TIMEOUT=45s longest wait for issuance after a run
#   EMBEDDED=1 FLOOR=1 CLUSTER=1 ROOM=1   0 skips that part
#   ROOM_N=           waiting users and streams (default 100,000 on 16 cores,
#                     scaled to the cores, 200 in SMOKE; capped by ulimit -n)
#   ROOM_IDLE=24 ROOM_LOOKUPS=10   seconds of the idle streams, of the lookups
#   STALL=0           1 adds part 8 (never in a SMOKE run): STALL_DURATION=30
#                     seconds, the database held STALL_FOR=10 s from STALL_AT=10
#                     s, on a fresh SQLite file whatever --db says
#   CPUS=             the CPU list to lay out (default: the CPUs this process may use)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$HERE/bin}
REDIS_SERVER=${REDIS_SERVER:-}
REDIS_LD_LIBRARY_PATH=${REDIS_LD_LIBRARY_PATH:-}
DB=${DB:-}
OUT=${OUT:-}
while [ $# -gt 0 ]; do
	case $1 in
	--redis-server) REDIS_SERVER=$2; shift 2 ;;
	--ld-library-path) REDIS_LD_LIBRARY_PATH=$2; shift 2 ;;
	--db) DB=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
	esac
done

SMOKE=${SMOKE:-0}
if [ "$SMOKE" = 1 ]; then
	DURATION=${DURATION:-1} MAX_DURATION=${MAX_DURATION:-1} CONNS=${CONNS:-8} WORKERS=${WORKERS:-32}
	ISSUE_TIMEOUT=${ISSUE_TIMEOUT:-20s} RATE_CAP=${RATE_CAP:-200}
fi
DURATION=${DURATION:-20}
MAX_DURATION=${MAX_DURATION:-15}
CONNS=${CONNS:-256}
WORKERS=${WORKERS:-1024}
ISSUE_TIMEOUT=${ISSUE_TIMEOUT:-45s}
RATE_CAP=${RATE_CAP:-0}
EMBEDDED=${EMBEDDED:-1}
FLOOR=${FLOOR:-1}
CLUSTER=${CLUSTER:-1}
ROOM=${ROOM:-1}
STALL=${STALL:-0}
[ "$SMOKE" = 1 ] && STALL=0
STALL_DURATION=${STALL_DURATION:-30}
STALL_AT=${STALL_AT:-10}
STALL_FOR=${STALL_FOR:-10}
CC=$BIN/claimcost
DIBS=$BIN/dibs
for b in "$CC" "$DIBS"; do
	[ -x "$b" ] || { echo "run.sh: $b is missing (build the bundle with make bench-bundle)" >&2; exit 1; }
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/dibs-bundle.XXXXXX")
PIDS=()
BEGAN=$(date +%s)
log() { printf '== [%3ds] %s\n' "$(($(date +%s) - BEGAN))" "$*" >&2; }

# stop ends a child we started: SIGTERM, up to 20 s to exit, then SIGKILL.
stop() {
	local pid=$1
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 200); do
		kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}
cleanup() {
	local i
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop "${PIDS[i]}"; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- redis-server
# A wrapper named redis-server first in PATH: the external servers and the
# private one `dibs serve` starts (it looks redis-server up in PATH) are the
# same binary with the same libraries.
mkdir -p "$TMP/path"
if [ -z "$REDIS_SERVER" ]; then
	if [ -x "$HERE/redis/redis-server" ]; then
		REDIS_SERVER=$HERE/redis/redis-server
	else
		REDIS_SERVER=$(command -v redis-server || true)
	fi
fi
[ -n "$REDIS_SERVER" ] && [ -x "$REDIS_SERVER" ] || {
	echo "run.sh: no redis-server: give --redis-server PATH (and --ld-library-path for its libraries)" >&2
	exit 1
}
{
	echo '#!/bin/sh'
	[ -n "$REDIS_LD_LIBRARY_PATH" ] && printf 'LD_LIBRARY_PATH=%q${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexport LD_LIBRARY_PATH\n' "$REDIS_LD_LIBRARY_PATH"
	printf 'exec %q "$@"\n' "$REDIS_SERVER"
} >"$TMP/path/redis-server"
chmod +x "$TMP/path/redis-server"
export PATH=$TMP/path:$PATH
REDIS=$TMP/path/redis-server
REDIS_VERSION=$("$REDIS" --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')
[ -n "$REDIS_VERSION" ] || { echo "run.sh: $REDIS_SERVER --version failed" >&2; exit 1; }

# ---------------------------------------------------------------- cores
# expand turns a CPU list such as 0-3,8 into "0 1 2 3 8".
expand() {
	local part out=()
	IFS=, read -ra parts <<<"$1"
	for part in "${parts[@]}"; do
		if [[ $part == *-* ]]; then out+=($(seq "${part%-*}" "${part#*-}")); else out+=("$part"); fi
	done
	echo "${out[@]}"
}
ALLOWED=${CPUS:-$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)}
read -ra CPU <<<"$(expand "$ALLOWED")"
NCPU=${#CPU[@]}
# cpus FROM COUNT prints COUNT CPUs from index FROM, comma-separated.
cpus() { local IFS=,; echo "${CPU[*]:$1:$2}"; }
# layout REDIS_CORES DIBS_CORES LOAD_CORES (for 16 cores) sets R, D, L
# (CPU lists), their sizes and NOTE, scaled down to the CPUs there are.
layout() {
	local r=$1 d=$2 l=$3
	if [ "$NCPU" -ge $((r + d + l)) ]; then
		NOTE=""
	elif [ "$NCPU" -ge $((r + 2)) ]; then
		d=$(((NCPU - r) * d / (d + l)))
		[ "$d" -ge 1 ] || d=1
		l=$((NCPU - r - d))
		NOTE="scaled down from Redis $1, dibs $2, load $3 cores to fit $NCPU CPUs"
	else
		# Too few CPUs for separate parts: Redis on the first, dibs on the
		# last, the load on all of them.
		R=$(cpus 0 1) D=$(cpus $((NCPU - 1)) 1) L=$(cpus 0 "$NCPU")
		RN=1 DN=1 LN=$NCPU
		NOTE="only $NCPU CPUs: the parts share cores (Redis $R, dibs $D, load $L), so the figures are crude"
		return
	fi
	R=$(cpus 0 "$r") D=$(cpus "$r" "$d") L=$(cpus $((r + d)) "$l")
	RN=$r DN=$d LN=$l
}
TASKSET=1
command -v taskset >/dev/null || { TASKSET=0; log "taskset not found: nothing is pinned"; }
# pin CPUS CMD... runs CMD on CPUS in place of the shell that calls it: run
# it in the background (pin ... &, so that $! is CMD's pid) or in a subshell.
pin() {
	local cpus=$1
	shift
	if [ "$TASKSET" = 1 ]; then exec taskset -c "$cpus" "$@"; else exec "$@"; fi
}

# ---------------------------------------------------------------- servers
# start_redis NAME CPUS [ARGS...] starts a redis-server without persistence
# on a free port (a Cluster node's bus port, 10000 above, too), sets
# REDIS_ADDR and waits for PING.
start_redis() {
	local name=$1 cpus=$2 pid port
	shift 2
	mkdir -p "$TMP/$name"
	for _ in $(seq 10); do
		port=$((20000 + RANDOM % 20000))
		pin "$cpus" "$REDIS" --port "$port" --bind 127.0.0.1 --daemonize no --dir "$TMP/$name" \
			--save '' --appendonly no --logfile "$TMP/$name.log" "$@" &
		pid=$!
		PIDS+=("$pid")
		for _ in $(seq 100); do
			if "$CC" redis -addr "127.0.0.1:$port" PING >/dev/null 2>&1; then
				REDIS_ADDR=127.0.0.1:$port
				return 0
			fi
			kill -0 "$pid" 2>/dev/null || break # a port taken: try another
			sleep 0.1
		done
		stop "$pid"
	done
	tail -n 20 "$TMP/$name.log" >&2
	echo "run.sh: redis-server did not start" >&2
	exit 1
}

# start_dibs NAME [ARGS...] starts `dibs serve` on D and sets DIBS_PID and
# DIBS_URL; with no --redis among ARGS it starts its private redis-server.
TOKEN=bundle-$RANDOM$RANDOM
start_dibs() {
	local name=$1 addr=""
	shift
	mkdir -p "$TMP/$name"
	DIBS_ADMIN_TOKEN=$TOKEN pin "$D" "$DIBS" serve --addr 127.0.0.1:0 --db "${DB:-sqlite://$TMP/$name/dibs.db}" \
		--data-dir "$TMP/$name/redis" --log-format json "$@" 2>"$TMP/$name.log" &
	DIBS_PID=$!
	PIDS+=("$DIBS_PID")
	for _ in $(seq 600); do
		addr=$(sed -n 's/.*"msg":"listening".*"addr":"\([^"]*\)".*/\1/p' "$TMP/$name.log" | head -n 1)
		[ -n "$addr" ] && break
		kill -0 "$DIBS_PID" 2>/dev/null || break
		sleep 0.1
	done
	[ -n "$addr" ] || { tail -n 30 "$TMP/$name.log" >&2; echo "run.sh: dibs serve did not start" >&2; exit 1; }
	DIBS_URL=http://$addr
}

# stop_all stops every server started so far.
stop_all() {
	local i
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop "${PIDS[i]}"; done
	PIDS=()
}

RES=$TMP/results.jsonl
: >"$RES"
# load PID ARGS... runs the load generator on L against the server PID and
# appends its result.
load() {
	local pid=$1
	shift
	(pin "$L" "$CC" load -pid "$pid" -issue-timeout "$ISSUE_TIMEOUT" -memory=false "$@") >>"$RES" ||
		{ echo "run.sh: load $* failed" >&2; exit 1; }
	log "$(tail -n 1 "$RES" | sed -n 's/.*"label":"\([^"]*\)".*"claims_per_second":\([0-9]*\).*"p99_ms":\([0-9.]*\).*/\1: \2 claims\/s, p99 \3 ms/p')"
}
# open_loop PID LABEL ROLE ARGS... runs the three open-loop runs.
open_loop() {
	local pid=$1 label=$2 role=$3 pct rate
	shift 3
	for pct in 25 50 80; do
		rate=$(awk -v m="$MAX" -v p="$pct" 'BEGIN { printf "%d", m * p / 100 < 1 ? 1 : m * p / 100 }')
		local extra=()
		[ "$pct" = 80 ] && [ $# -gt 0 ] && extra=(-slowlog 500us)
		load "$pid" -target "$TARGET" -rate "$rate" -duration "${DURATION}s" -c "$WORKERS" \
			-label "$label, $pct %" -role "$role-$pct" "$@" "${extra[@]}"
	done
}

CPU_MODEL=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || echo unknown)
log "machine: $NCPU CPUs ($CPU_MODEL), Redis $REDIS_VERSION$([ "$SMOKE" = 1 ] && echo ', SMOKE run')"

# ---------------------------------------------------------------- 1, 2: external Redis
layout 1 6 8
SINGLE="Redis on CPU $R, dibs on CPUs $D ($DN), load on CPUs $L ($LN)"
SINGLE_NOTE=$NOTE
DIBS_CORES=$DN LOAD_CORES=$LN
log "layout: $SINGLE${NOTE:+ ($NOTE)}"
start_redis ext "$R"
EXT=$REDIS_ADDR
start_dibs ext --redis "$EXT"
TARGET=$DIBS_URL
load "$DIBS_PID" -target "$TARGET" -admin-token "$TOKEN" -redis "$EXT" -duration "${MAX_DURATION}s" -c "$CONNS" \
	-label "dibs, external Redis, maximum" -role ext-max
MAX=$("$CC" get "$RES" claims_per_second)
[ "$RATE_CAP" -gt 0 ] && MAX=$(awk -v m="$MAX" -v c="$RATE_CAP" 'BEGIN { print (m < c ? m : c) }')
open_loop "$DIBS_PID" "dibs, external Redis" ext -admin-token "$TOKEN" -redis "$EXT"
stop_all

# ---------------------------------------------------------------- 8: a database stall
if [ "$STALL" = 1 ]; then
	start_redis stall "$R"
	db=$DB
	DB="" # the stall takes SQLite's write lock: a fresh file, whatever --db says
	start_dibs stall --redis "$REDIS_ADDR"
	DB=$db
	load "$DIBS_PID" -target "$DIBS_URL" -admin-token "$TOKEN" -redis "$REDIS_ADDR" -duration "${STALL_DURATION}s" -c "$CONNS" \
		-stall-db "sqlite://$TMP/stall/dibs.db" -stall-at "${STALL_AT}s" -stall-for "${STALL_FOR}s" \
		-label "dibs, external Redis, maximum, SQLite held ${STALL_FOR} s from ${STALL_AT} s" -role stall
	stop_all
fi

# ---------------------------------------------------------------- 2: the embedded default
if [ "$EMBEDDED" = 1 ]; then
	start_dibs emb
	emb=$(sed -n 's/.*"msg":"started private redis-server".*"addr":"\([^"]*\)".*/\1/p' "$TMP/emb.log" | head -n 1)
	# Its redis-server is dibs's child: move it (every thread) to Redis's CPU.
	for stat in /proc/[0-9]*/stat; do
		cpid=${stat#/proc/} cpid=${cpid%/stat}
		ppid=$(sed 's/.*) [A-Za-z] \([0-9]*\) .*/\1/' "$stat" 2>/dev/null) || continue
		if [ "$ppid" = "$DIBS_PID" ] && [ "$TASKSET" = 1 ]; then taskset -a -p -c "$R" "$cpid" >/dev/null; fi
	done
	TARGET=$DIBS_URL
	load "$DIBS_PID" -target "$TARGET" -admin-token "$TOKEN" -redis "$emb" -duration "${MAX_DURATION}s" -c "$CONNS" \
		-label "dibs serve, embedded default (private Redis, AOF everysec), maximum" -role emb-max
	open_loop "$DIBS_PID" "dibs serve, embedded default" emb -admin-token "$TOKEN" -redis "$emb"
	stop_all
fi

# ---------------------------------------------------------------- 2: the floor
if [ "$FLOOR" = 1 ]; then
	pin "$D" "$CC" floor >"$TMP/floor.addr" &
	FLOOR_PID=$!
	PIDS+=("$FLOOR_PID")
	for _ in $(seq 100); do [ -s "$TMP/floor.addr" ] && break; sleep 0.1; done
	TARGET=http://$(awk '{print $2}' "$TMP/floor.addr")
	load "$FLOOR_PID" -target "$TARGET" -duration "${MAX_DURATION}s" -c "$CONNS" \
		-label "HTTP floor server (202 and nothing else), maximum" -role floor-max
	open_loop "$FLOOR_PID" "HTTP floor server" floor
	stop_all
fi

# ---------------------------------------------------------------- 5: segments on a Cluster
CLUSTER_LAYOUT=""
if [ "$CLUSTER" = 1 ]; then
	layout 3 5 8
	CLUSTER_LAYOUT="Redis masters on CPUs $R ($RN), dibs on CPUs $D ($DN), load on CPUs $L ($LN)${NOTE:+ ($NOTE)}"
	log "Cluster layout: $CLUSTER_LAYOUT"
	read -ra RC <<<"$(expand "$R")"
	nodes=()
	for i in 0 1 2; do
		start_redis "node$i" "${RC[i % ${#RC[@]}]}" --cluster-enabled yes --cluster-config-file "$TMP/node$i/nodes.conf" \
			--cluster-node-timeout 5000
		nodes+=("$REDIS_ADDR")
	done
	ADDRS=$(IFS=,; echo "${nodes[*]}")
	"$CC" cluster -addrs "$ADDRS"
	start_dibs cluster --redis "$ADDRS"
	TARGET=$DIBS_URL
	for seg in 1 3; do
		load "$DIBS_PID" -target "$TARGET" -admin-token "$TOKEN" -redis "$ADDRS" -duration "${MAX_DURATION}s" -c "$CONNS" -segments "$seg" \
			-label "segments $seg, closed loop" -role segments
	done
	stop_all
fi

# ---------------------------------------------------------------- 7: the waiting room (begin)
# One instance against the waiting room's targets: ROOM_N users join a
# paused room (the line stands still), each holds an event stream open
# (dialed from 127.0.0.2 … 127.0.0.255), idle for ROOM_IDLE s, then a hint
# (the room's message) is timed to every stream and status lookups run for
# ROOM_LOOKUPS s. ROOM_N is 100,000 on 16 cores, scaled to the cores there
# are, and capped by the file limit, which is raised as far as it goes.
ROOM_TABLE=$TMP/room.md
if [ "$ROOM" = 1 ]; then
	ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
	nofile=$(ulimit -n)
	[ "$nofile" = unlimited ] && nofile=1048576
	if [ "$SMOKE" = 1 ]; then ROOM_N=${ROOM_N:-200} ROOM_IDLE=${ROOM_IDLE:-2} ROOM_LOOKUPS=${ROOM_LOOKUPS:-1}; fi
	ROOM_N=${ROOM_N:-$((NCPU >= 16 ? 100000 : 100000 * NCPU / 16))}
	ROOM_IDLE=${ROOM_IDLE:-24}
	ROOM_LOOKUPS=${ROOM_LOOKUPS:-10}
	# Each process holds a socket per stream, and some more of its own.
	if [ "$ROOM_N" -gt $((nofile * 9 / 10 - 100)) ]; then
		log "waiting room: ulimit -n is $nofile: $ROOM_N users cut to $((nofile * 9 / 10 - 100))"
		ROOM_N=$((nofile * 9 / 10 - 100))
	fi
	layout 1 6 8
	ROOM_LAYOUT="Redis on CPU $R, dibs on CPUs $D ($DN), load on CPUs $L ($LN)${NOTE:+ ($NOTE)}"
	log "waiting room: $ROOM_N streams; $ROOM_LAYOUT"
	printf 'http:\n  max_conns: %d\n  max_streams: %d\n' $((ROOM_N + 1000)) $((ROOM_N + 100)) >"$TMP/room.yaml"
	start_redis room "$R"
	ROOM_REDIS=$REDIS_ADDR
	start_dibs room --redis "$ROOM_REDIS" --config "$TMP/room.yaml"
	(pin "$L" "$CC" room -target "$DIBS_URL" -pid "$DIBS_PID" -redis "$ROOM_REDIS" -admin-token "$TOKEN" \
		-n "$ROOM_N" -c "$CONNS" -readers "$((LN > 1 ? LN : 2))" -idle "${ROOM_IDLE}s" -lookups "${ROOM_LOOKUPS}s" \
		-json "$TMP/room.jsonl" -note "Layout: $ROOM_LAYOUT; ulimit -n $nofile.") >"$ROOM_TABLE" ||
		{ echo "run.sh: the waiting-room run failed" >&2; exit 1; }
	log "waiting room: $(sed -n 's/.*"joins_per_second":\([0-9]*\).*"hint_ms":\([0-9.]*\).*"lookups_per_second":\([0-9]*\).*/\1 joins\/s, hint \2 ms, \3 lookups\/s/p' "$TMP/room.jsonl")"
	stop_all
fi
# ---------------------------------------------------------------- 7: the waiting room (end)

# ---------------------------------------------------------------- table
{
	echo "Machine: $NCPU CPUs ($CPU_MODEL), $(uname -sr), Redis $REDIS_VERSION; database ${DB:-SQLite (a fresh file per server)}."
	echo "Layout: $SINGLE${SINGLE_NOTE:+ — $SINGLE_NOTE}.${CLUSTER_LAYOUT:+ Cluster part: $CLUSTER_LAYOUT.}"
	echo "Closed loop: $CONNS connections for ${MAX_DURATION} s; open loop: ${DURATION} s at 25/50/80 % of the first maximum ($(printf '%.0f' "$MAX") claims/s$([ "$RATE_CAP" -gt 0 ] && echo ", capped at $RATE_CAP")), $WORKERS senders, latency from each claim's due time. Run took $(($(date +%s) - BEGAN)) s$([ "$SMOKE" = 1 ] && echo '; SMOKE run: the figures mean nothing')."
	echo
	"$CC" table -dibs-cores "$DIBS_CORES" -load-cores "$LOAD_CORES" "$RES"
	[ ! -s "$ROOM_TABLE" ] || { echo; cat "$ROOM_TABLE"; } # the waiting room (7)
} | tee "${OUT:-/dev/null}"
[ -z "$OUT" ] || cp "$RES" "$OUT.jsonl"
[ -z "$OUT" ] || [ ! -s "$TMP/room.jsonl" ] || cp "$TMP/room.jsonl" "$OUT.room.jsonl" # the waiting room (7)
