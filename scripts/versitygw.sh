#!/usr/bin/env bash
# A private S3-compatible server (versitygw, Apache-2.0) for remote/'s conformance suite.
#
#   scripts/versitygw.sh start   install versitygw when missing (go install into a cache dir,
#                                about 90 s once), start a private server (own directory,
#                                free loopback port, generated credentials, a bucket
#                                named strom) unless one is
#                                already running, and print the variables the tests read
#   scripts/versitygw.sh env     print them for the running server (exit 1 if none)
#   scripts/versitygw.sh stop    stop it and remove its directory
#   scripts/versitygw.sh bin     install when missing and print the binary's path
#
# State lives in $STROM_VERSITYGW_DIR (default ${TMPDIR:-/tmp}/strom-versitygw); the port is
# $STROM_VERSITYGW_PORT when set, else a free one. The binary is cached in
# $STROM_CACHE_DIR (default ~/.cache/strom). Only the variables go to stdout, so:
#   eval "$(scripts/versitygw.sh start)"
# exports STROM_S3_ENDPOINT, STROM_S3_ACCESS_KEY, STROM_S3_SECRET_KEY and STROM_VERSITYGW
# (the binary, for the tests that stop and start a server of their own).
set -euo pipefail

VERSION=v1.8.0
DIR=${STROM_VERSITYGW_DIR:-${TMPDIR:-/tmp}/strom-versitygw}
CACHE=${STROM_CACHE_DIR:-$HOME/.cache/strom}/versitygw-$VERSION
BIN=$CACHE/versitygw

log() { echo "versitygw.sh: $*" >&2; }

install() {
  [ -x "$BIN" ] && return 0
  log "installing versitygw $VERSION into $CACHE (about 90 s, once)"
  mkdir -p "$CACHE"
  (cd "$CACHE" && GOBIN="$CACHE" go install "github.com/versity/versitygw/cmd/versitygw@$VERSION") >&2
}

port_of() { cat "$DIR/port" 2>/dev/null; }

pid_of() { cat "$DIR/versitygw.pid" 2>/dev/null; }

# answers PORT: an HTTP status line comes back from the port.
answers() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && timeout 2 head -c 12 <&3) 2>/dev/null | grep -q '^HTTP/'
}

running() {
  local pid port
  pid=$(pid_of) port=$(port_of)
  [ -n "$pid" ] && [ -n "$port" ] && kill -0 "$pid" 2>/dev/null && answers "$port"
}

free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$((20000 + RANDOM % 20000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  log "no free port found"; exit 1
}

print_env() {
  echo "export STROM_S3_ENDPOINT=http://127.0.0.1:$(port_of)"
  echo "export STROM_S3_ACCESS_KEY=$(sed -n 1p "$DIR/credentials")"
  echo "export STROM_S3_SECRET_KEY=$(sed -n 2p "$DIR/credentials")"
  echo "export STROM_VERSITYGW=$BIN"
}

start() {
  install
  if running; then
    print_env
    return
  fi
  # A bucket named strom, for the README's example (s3://strom/...): with the posix backend a
  # bucket is a directory of the data directory. The tests make buckets of their own.
  mkdir -p "$DIR/data/strom"
  if [ ! -s "$DIR/credentials" ]; then
    (umask 077 && { od -An -N10 -tx1 /dev/urandom | tr -d ' \n'; echo; od -An -N20 -tx1 /dev/urandom | tr -d ' \n'; echo; } >"$DIR/credentials")
  fi
  local port=${STROM_VERSITYGW_PORT:-$(port_of || true)}
  if [ -z "$port" ] || (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then # none yet, or taken
    [ -n "${STROM_VERSITYGW_PORT:-}" ] && { log "port $port is taken"; exit 1; }
    port=$(free_port)
  fi
  echo "$port" >"$DIR/port"
  "$BIN" --port "127.0.0.1:$port" --quiet \
    --access "$(sed -n 1p "$DIR/credentials")" --secret "$(sed -n 2p "$DIR/credentials")" \
    posix "$DIR/data" >"$DIR/versitygw.log" 2>&1 </dev/null &
  echo $! >"$DIR/versitygw.pid"
  for _ in $(seq 1 300); do
    if running; then
      print_env
      return
    fi
    kill -0 "$(pid_of)" 2>/dev/null || break
    sleep 0.1
  done
  log "versitygw did not answer on port $port; its log:"; cat "$DIR/versitygw.log" >&2
  exit 1
}

stop() {
  local pid
  pid=$(pid_of || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$DIR"
}

case "${1:-start}" in
  start) start ;;
  env) running && print_env || exit 1 ;;
  stop) stop ;;
  bin) install; echo "$BIN" ;;
  *) echo "usage: $0 start|env|stop|bin" >&2; exit 2 ;;
esac
