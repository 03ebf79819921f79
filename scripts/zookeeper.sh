#!/usr/bin/env bash
# A private ZooKeeper for the differential tests of raftmeta/zkwire.
#
#   scripts/zookeeper.sh start   install Debian's zookeeper package when missing, start a
#                                private server (own dataDir, free loopback port) unless one
#                                is already running, and print its address (host:port); a
#                                stopped one whose directory remains (killed by its PID, in
#                                $STROM_ZK_DIR/zookeeper.pid) starts again with its port and data
#   scripts/zookeeper.sh addr    print the running server's address (exit 1 if none)
#   scripts/zookeeper.sh stop    stop it and remove its directory
#
# State lives in $STROM_ZK_DIR (default ${TMPDIR:-/tmp}/strom-zookeeper). Only the address
# goes to stdout, so: export STROM_ZK_ADDR=$(scripts/zookeeper.sh start)
set -euo pipefail

DIR=${STROM_ZK_DIR:-${TMPDIR:-/tmp}/strom-zookeeper}
BIN=/usr/share/zookeeper/bin
CFG=$DIR/zoo.cfg

log() { echo "zookeeper.sh: $*" >&2; }

install() {
  [ -x "$BIN/zkServer.sh" ] && return 0
  log "installing the zookeeper package"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y zookeeper >&2; then
    $sudo apt-get update >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y zookeeper >&2
  fi
}

# flw PORT WORD prints the answer to a four-letter word, or nothing.
flw() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf '%s' "$2" >&3 && timeout 2 cat <&3) 2>/dev/null || true
}

port_of() { sed -n 's/^clientPort=//p' "$CFG" 2>/dev/null; }

running() {
  local port
  port=$(port_of)
  [ -n "$port" ] && [ "$(flw "$port" ruok)" = "imok" ]
}

free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$((${PORT_MIN:-20000} + RANDOM % (${PORT_MAX:-39999} - ${PORT_MIN:-20000} + 1))) # PORT_MIN/PORT_MAX when set
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  log "no free port found"; exit 1
}

start() {
  install
  if running; then
    echo "127.0.0.1:$(port_of)"
    return
  fi
  mkdir -p "$DIR/data" "$DIR/logs"
  local port
  port=$(port_of || true)
  if [ -z "$port" ] || (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then # none yet, or taken
    port=$(free_port); write_cfg "$port"
  fi
  ZOO_LOG_DIR="$DIR/logs" ZOOPIDFILE="$DIR/zookeeper.pid" "$BIN/zkServer.sh" start "$CFG" >&2
  for _ in $(seq 1 300); do
    if running; then
      echo "127.0.0.1:$port"
      return
    fi
    sleep 0.1
  done
  log "ZooKeeper did not answer ruok on port $port; logs in $DIR/logs"
  exit 1
}

write_cfg() {
  cat >"$CFG" <<CFG
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$DIR/data
clientPort=$1
clientPortAddress=127.0.0.1
maxClientCnxns=0
4lw.commands.whitelist=*
admin.enableServer=false
# TTL nodes (createTTL), off by default; ZooKeeper reads unknown keys as
# zookeeper.* system properties. The shim supports them, so the differential
# tests compare them.
extendedTypesEnabled=true
CFG
}

stop() {
  if [ -f "$CFG" ] && [ -x "$BIN/zkServer.sh" ]; then
    ZOO_LOG_DIR="$DIR/logs" ZOOPIDFILE="$DIR/zookeeper.pid" "$BIN/zkServer.sh" stop "$CFG" >&2 || true
  fi
  rm -rf "$DIR"
}

case "${1:-start}" in
  start) start ;;
  addr) running && echo "127.0.0.1:$(port_of)" || exit 1 ;;
  stop) stop ;;
  *) echo "usage: $0 start|addr|stop" >&2; exit 2 ;;
esac
