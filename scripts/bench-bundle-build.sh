#!/usr/bin/env bash
# bench-bundle-build.sh builds the benchmark bundle (make bench-bundle): a
# tarball of static binaries (CGO_ENABLED=0: bin/dibs, and bin/claimcost,
# which is the load generator, the bare HTTP floor server and the table
# maker) and run.sh (scripts/bench-bundle.sh), to copy to a big Linux
# machine with no Go toolchain and no network and run there:
#
#   tar xzf dibs-bench-linux-amd64.tar.gz && cd dibs-bench && ./run.sh --redis-server /path/to/redis-server
#
# Environment (all optional):
#   OUT=dibs-bench-linux-amd64.tar.gz   the tarball to write
#   GOARCH=amd64                        the target machine's architecture
#   BUNDLE_REDIS=0    1 also copies REDIS_SERVER and every shared library
#                     `ldd` lists for it (the dynamic loader included) into
#                     redis/, behind a wrapper that runs it with those
#                     libraries: the tarball is then self-contained (same
#                     architecture as this machine only)
#   REDIS_SERVER=     the redis-server to copy (default: redis-server in PATH)
#   GO=go
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
ARCH=${GOARCH:-amd64}
OUT=${OUT:-dibs-bench-linux-$ARCH.tar.gz}
BUNDLE_REDIS=${BUNDLE_REDIS:-0}
MAX_BYTES=$((40 << 20))

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/dibs-bundle-build.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
DIR=$STAGE/dibs-bench
mkdir -p "$DIR/bin"

VERSION=$(git describe --always --dirty 2>/dev/null || echo devel)
echo "building bin/dibs and bin/claimcost for linux/$ARCH (CGO_ENABLED=0, $VERSION)" >&2
for target in dibs:./cmd/dibs claimcost:./bench/claimcost; do
	CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH "$GO" build -trimpath \
		-ldflags="-s -w -X github.com/dibsio/dibs/internal/buildinfo.version=$VERSION" \
		-o "$DIR/bin/${target%%:*}" "${target#*:}"
done
cp scripts/bench-bundle.sh "$DIR/run.sh"
chmod +x "$DIR/run.sh"

if [ "$BUNDLE_REDIS" = 1 ]; then
	src=${REDIS_SERVER:-$(command -v redis-server || true)}
	[ -n "$src" ] && [ -x "$src" ] || { echo "bench-bundle: no redis-server to copy (REDIS_SERVER=)" >&2; exit 1; }
	command -v ldd >/dev/null || { echo "bench-bundle: BUNDLE_REDIS=1 needs ldd" >&2; exit 1; }
	mkdir -p "$DIR/redis/bin" "$DIR/redis/lib"
	# -L: /usr/bin/redis-server is often a link to redis-check-rdb, and
	# redis picks its mode from its name: the copy is named redis-server.
	cp -L "$src" "$DIR/redis/bin/redis-server"
	loader=""
	while read -r lib; do
		cp -L "$lib" "$DIR/redis/lib/"
		case $(basename "$lib") in ld-linux*.so* | ld64.so*) loader=$(basename "$lib") ;; esac
	done < <(ldd "$src" | awk '/=> \// { print $3; next } /^[[:space:]]*\// { print $1 }')
	[ -n "$loader" ] || { echo "bench-bundle: ldd $src names no dynamic loader" >&2; exit 1; }
	# The bundled loader runs the binary with the bundled libraries only,
	# whatever the target machine's own C library is.
	cat >"$DIR/redis/redis-server" <<EOF
#!/bin/sh
d=\$(dirname "\$(readlink -f "\$0")")
exec "\$d/lib/$loader" --library-path "\$d/lib" "\$d/bin/redis-server" "\$@"
EOF
	chmod +x "$DIR/redis/redis-server"
	echo "bundled $src ($("$DIR/redis/redis-server" --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')) and $(ls "$DIR/redis/lib" | wc -l) libraries" >&2
fi

cat >"$DIR/README.txt" <<EOF
dibs benchmark bundle ($VERSION, linux/$ARCH). On the machine to measure, as root or not:

  ./run.sh --redis-server /path/to/redis-server [--ld-library-path DIR]
  SMOKE=1 ./run.sh ...   # a seconds-long check that everything starts

$( [ "$BUNDLE_REDIS" = 1 ] && echo "This bundle carries its own redis-server (redis/): ./run.sh alone uses it." )
./run.sh --help lists the knobs. It prints one Markdown table (--out FILE keeps it).
EOF

tar -C "$STAGE" -czf "$OUT" dibs-bench
size=$(stat -c %s "$OUT")
if [ "$size" -gt "$MAX_BYTES" ]; then
	echo "bench-bundle: $OUT is $((size >> 20)) MiB, over the 40 MiB limit" >&2
	exit 1
fi
echo "wrote $OUT ($((size >> 10)) KiB)" >&2
