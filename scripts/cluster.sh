#!/usr/bin/env bash
# A local Strom cluster of real processes on loopback ports.
#
#   scripts/cluster.sh start N     build strom and start nodes 1..N (N=3 by default) at once,
#                                  forming one cluster (--bootstrap-expect N); wait until it
#                                  answers, and print `strom cluster describe`
#   scripts/cluster.sh stop        stop every node (SIGTERM: controlled shutdown)
#   scripts/cluster.sh kill I      SIGKILL node I
#   scripts/cluster.sh restart I   stop node I (SIGTERM, or it is already dead) and start it again
#   scripts/cluster.sh start-node I  start node I alone (a fourth node joins an existing cluster)
#   scripts/cluster.sh status      which nodes run, and `strom cluster describe`
#   scripts/cluster.sh clean       stop every node and remove the cluster's directory
#
# Node I listens on 127.0.0.1 ports 9113+10*I (API), 9114+10*I (Raft), 9115+10*I (gossip):
# node 1 on 9123/9124/9125, node 2 on 9133/9134/9135, ... Its data is in $DIR/nI, its log in
# $DIR/nI/log. $DIR is $STROM_CLUSTER_DIR (default ./strom-cluster). The cluster secret is
# $STROM_CLUSTER_SECRET, or one generated into $DIR/secret on the first start.
# Talk to it with: go run . --server 127.0.0.1:9123,127.0.0.1:9133,127.0.0.1:9143 ...
set -euo pipefail

cd "$(dirname "$0")/.."
DIR=${STROM_CLUSTER_DIR:-./strom-cluster}
BIN=$DIR/strom

log() { echo "cluster.sh: $*" >&2; }
die() { log "$*"; exit 1; }

api_port() { echo $((9113 + 10 * $1)); }

pid_of() {
  local f=$DIR/n$1/pid
  [ -f "$f" ] || return 1
  local pid
  pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

# nodes lists the node numbers that have a directory.
nodes() {
  local d
  for d in "$DIR"/n*; do
    [ -d "$d" ] && echo "${d##*/n}"
  done | sort -n
}

servers() {
  local list="" i
  for i in $(nodes); do list="$list${list:+,}127.0.0.1:$(api_port "$i")"; done
  echo "$list"
}

secret() {
  if [ -n "${STROM_CLUSTER_SECRET:-}" ]; then
    echo "$STROM_CLUSTER_SECRET"
    return
  fi
  if [ ! -f "$DIR/secret" ]; then
    (umask 077 && head -c 32 /dev/urandom | base64 >"$DIR/secret")
  fi
  cat "$DIR/secret"
}

build() {
  mkdir -p "$DIR"
  go build -o "$BIN" .
}

# start_node I EXPECT JOIN starts node I in the background.
start_node() {
  local i=$1 expect=$2 join=$3
  if pid_of "$i" >/dev/null; then
    log "node $i already runs (pid $(pid_of "$i"))"
    return
  fi
  mkdir -p "$DIR/n$i"
  local a=$((9113 + 10 * i)) s
  # Read here, not in the background command below: there the first node's subshell would write
  # the file while the next node's read it.
  s=$(secret)
  STROM_CLUSTER_SECRET=$s nohup "$BIN" server \
    --node-id "$i" --data-dir "$DIR/n$i/data" \
    --listen "127.0.0.1:$a" --raft-listen "127.0.0.1:$((a + 1))" \
    --gossip-listen "127.0.0.1:$((a + 2))" \
    --join "$join" --bootstrap-expect "$expect" \
    >>"$DIR/n$i/log" 2>&1 </dev/null &
  echo $! >"$DIR/n$i/pid"
  log "node $i started (pid $!, api 127.0.0.1:$a, log $DIR/n$i/log)"
}

expect() { cat "$DIR/expect" 2>/dev/null || echo 1; }

join_list() {
  local n=$1 list="" i
  for i in $(seq 1 "$n"); do list="$list${list:+,}127.0.0.1:$((9115 + 10 * i))"; done
  echo "$list"
}

wait_ready() {
  local i deadline=$((SECONDS + 60))
  for i in "$@"; do
    until curl -sf "http://127.0.0.1:$(api_port "$i")/readyz" >/dev/null 2>&1; do
      if ! pid_of "$i" >/dev/null; then
        tail -20 "$DIR/n$i/log" >&2
        die "node $i exited; its log is $DIR/n$i/log"
      fi
      [ $SECONDS -lt $deadline ] || die "node $i is not ready after 60 s; its log is $DIR/n$i/log"
      sleep 0.2
    done
  done
}

describe() {
  "$BIN" --server "$(servers)" cluster describe || true
}

stop_node() {
  local i=$1 pid
  pid=$(pid_of "$i") || return 0
  kill -TERM "$pid"
  local deadline=$((SECONDS + 60))
  while kill -0 "$pid" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { log "node $i did not stop in 60 s; killing it"; kill -KILL "$pid"; }
    sleep 0.1
  done
  log "node $i stopped"
}

cmd=${1:-status}
case $cmd in
start)
  n=${2:-3}
  [ "$n" -ge 1 ] || die "start N: N must be at least 1"
  build
  echo "$n" >"$DIR/expect"
  join=$(join_list "$n")
  for i in $(seq 1 "$n"); do start_node "$i" "$n" "$join"; done
  wait_ready $(seq 1 "$n")
  describe
  ;;
start-node)
  i=${2:?start-node I}
  build
  n=$(nodes | tail -1)
  [ -n "$n" ] || n=$i
  # The node sees the cluster's members have Raft state and joins them (it never bootstraps
  # a cluster of its own while --bootstrap-expect members are not all visible).
  start_node "$i" "$(expect)" "$(join_list "$((n > i ? n : i))")"
  wait_ready "$i"
  describe
  ;;
stop)
  for i in $(nodes); do stop_node "$i"; done
  ;;
kill)
  i=${2:?kill I}
  pid=$(pid_of "$i") || die "node $i is not running"
  kill -KILL "$pid"
  log "node $i killed (pid $pid)"
  ;;
restart)
  i=${2:?restart I}
  [ -d "$DIR/n$i" ] || die "node $i was never started"
  stop_node "$i"
  n=$(nodes | tail -1)
  # A restarted node has Raft state and never bootstraps again.
  start_node "$i" "$(expect)" "$(join_list "$n")"
  wait_ready "$i"
  ;;
status)
  for i in $(nodes); do
    if pid=$(pid_of "$i"); then echo "node $i: running (pid $pid)"; else echo "node $i: stopped"; fi
  done
  [ -x "$BIN" ] && describe
  ;;
clean)
  for i in $(nodes); do stop_node "$i"; done
  rm -rf "$DIR"
  ;;
*)
  die "unknown command $cmd (start N | start-node I | stop | kill I | restart I | status | clean)"
  ;;
esac
