#!/usr/bin/env bash
# Makes sure the servers the tests and `dibs demo` start by themselves are
# installed: redis-server (7.0 or newer), the PostgreSQL server binaries,
# Debian's chromium, which the dashboard's browser tests drive headless, and
# promtool (Debian's prometheus package), which checks deploy/'s alert rules.
# It never starts a service; the test helpers run their own private servers.
#
# Usage: scripts/deps.sh [--redis-only] [--no-browser]
#
# Safe to run again and again: it installs only what is missing, with apt-get
# (as root, or through sudo). Elsewhere it says what to install and fails.
set -euo pipefail

redis_only=0
browser=1
for arg in "$@"; do
  case "$arg" in
    --redis-only) redis_only=1; browser=0 ;;
    --no-browser) browser=0 ;;
    *) echo "usage: $0 [--redis-only] [--no-browser]" >&2; exit 2 ;;
  esac
done

# pg_bin NAME prints the path of a PostgreSQL server binary, from PATH or
# from Debian's versioned directories (newest first), or nothing.
pg_bin() {
  local p
  if p=$(command -v "$1" 2>/dev/null); then
    echo "$p"
    return
  fi
  for p in $(ls -1d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
    if [ -x "$p/$1" ]; then
      echo "$p/$1"
      return
    fi
  done
}

missing=()
check() {
  missing=()
  redis=$(command -v redis-server 2>/dev/null || true)
  [ -n "$redis" ] || missing+=(redis-server redis-tools)
  if [ "$redis_only" = 0 ]; then
    initdb=$(pg_bin initdb)
    postgres=$(pg_bin postgres)
    if [ -z "$initdb" ] || [ -z "$postgres" ]; then
      missing+=(postgresql)
    fi
  fi
  if [ "$browser" = 1 ] && [ ! -x /usr/bin/chromium ]; then
    missing+=(chromium)
  fi
  if [ "$redis_only" = 0 ] && ! command -v promtool >/dev/null 2>&1; then
    missing+=(prometheus)
  fi
}

install() {
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "deps: missing ${missing[*]}; install them as root:" >&2
      echo "  apt-get install ${missing[*]}    (Debian/Ubuntu)" >&2
      echo "  brew install redis postgresql prometheus    (macOS; the browser tests need Debian's chromium)" >&2
      exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: missing ${missing[*]} and no apt-get here; install them with your package manager" >&2
    echo "  (macOS: brew install redis postgresql prometheus)" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}" >&2
  # Keep the packages' install scripts from starting system-wide services
  # (prometheus's included; only its promtool is used):
  # policy-rc.d answering 101 forbids it. Only add one if none is there.
  local policy=/usr/sbin/policy-rc.d
  local own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"
    own_policy=1
  fi
  local rc=0
  {
    if [ -z "${DIBS_APT_UPDATED:-}" ]; then
      "${sudo[@]}" apt-get update -qq
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends "${missing[@]}"
  } || rc=$?
  if [ "$own_policy" = 1 ]; then
    "${sudo[@]}" rm -f "$policy"
  fi
  return "$rc"
}

check
if [ "${#missing[@]}" -gt 0 ]; then
  install
  check
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "deps: still missing ${missing[*]} after installing" >&2
    exit 1
  fi
fi

redis_version=$("$redis" --version | sed -n 's/.* v=\([0-9.]*\).*/\1/p')
case "$redis_version" in
  [0-6].*) echo "deps: redis-server $redis_version is too old; dibs needs 7.0 or newer" >&2; exit 1 ;;
esac
line="deps: redis-server $redis_version ($redis)"
if [ "$redis_only" = 0 ]; then
  pg_version=$("$postgres" --version | sed -n 's/^[^0-9]*\([0-9][0-9.]*\).*/\1/p')
  line="$line, postgres $pg_version ($(dirname "$postgres"))"
fi
if [ "$browser" = 1 ]; then
  line="$line, $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
fi
if [ "$redis_only" = 0 ]; then
  line="$line, $(promtool --version 2>&1 | head -n 1)"
fi
echo "$line"
