#!/usr/bin/env bash
# scripts/bench-peers.sh: Strom, Apache Fluss 0.9.1 and Apache Kafka 4.4.0 side by side on the
# same workloads, serially, on this machine, loopback only; docs/benchmarks.md's peer table.
#
#   scripts/bench-peers.sh                 # ROUNDS=3; prints a markdown table, then one JSON line
#   ROUNDS=1 SYSTEMS="strom fluss" scripts/bench-peers.sh
#
# One round = a fresh Strom node (this checkout's binary) + internal/peerbench (the workloads of
# scripts/peerbench/FlussBench.java through Strom's Go client: the same rows, byte for byte, from
# the same seeds, the same keys in the same order, the same bucket counts, codec, acks and writer
# settings), then scripts/peerbench/fluss.sh (Fluss's own servers and Java client; Fluss from
# Maven Central), then scripts/peerbench/kafka.sh (WORKLOAD=wide; Kafka from Maven Central), in
# an order that rotates from round to round. SYSTEMS="strom-fluss fluss" compares the servers with
# the very same client: strom-fluss is a fresh Strom node with a fluss.listen, and FlussBench.java
# (Fluss's Java client, fluss.sh TARGET=) run against it exactly as against Fluss. Each system waits for a quiet box first. The table
# has the medians over the rounds, and a second table each workload's CPU time a record, the
# servers' and the client's (from /proc and getrusage, which a busy box moves far less than the
# rates); progress goes to stderr. Peers are installed into PEERS_DIR
# once (mvn, javac; Debian's openjdk, maven and zookeeper when missing).
# Env: ROUNDS (3), N (log rows for all three, 200000), KV_N (PK rows, Strom and Fluss, 200000),
#      WIDE_N (rows of the 8-column workload, 100000; 0 skips it), SYSTEMS ("strom fluss kafka": a
#      subset runs only those; strom-fluss adds Strom behind the Fluss client), BUSY_MAX (CPU busy % above which the box counts as not quiet, 25),
#      QUIET_WAIT (seconds to wait for a quiet box before each system, 120; it measures anyway
#      after that and says so), STRICT (1: fail instead), PORT_MIN/PORT_MAX (the loopback ports
#      the servers may take, 10000-31999), OUT_DIR (the per-run outputs and logs; default
#      PEERS_DIR/bench-peers/results-<time>), PEERS_DIR (~/.cache/peers), plus peerbench's knobs
#      (BATCH_SIZE, LOOKUP_BATCH, LOOKUP_BATCH_TIMEOUT, SCAN_WAIT; see internal/peerbench/main.go).
set -Eeuo pipefail

ROUNDS=${ROUNDS:-3}; N=${N:-200000}; KV_N=${KV_N:-200000}; WIDE_N=${WIDE_N:-100000}
SYSTEMS=${SYSTEMS:-strom fluss kafka}; BUSY_MAX=${BUSY_MAX:-25}; QUIET_WAIT=${QUIET_WAIT:-120}; STRICT=${STRICT:-0}
PEERS_DIR=${PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/peers}; SBS=$PEERS_DIR/bench-peers
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd); PEERS=$HERE/peerbench; ROOT=$(cd "$HERE/.." && pwd)
PORT_MIN=${PORT_MIN:-10000}; PORT_MAX=${PORT_MAX:-31999}; export PORT_MIN PORT_MAX
OUT_DIR=${OUT_DIR:-$SBS/results-$(date -u +%Y%m%dT%H%M%SZ)}
log() { echo "[bench-peers] $*" >&2; }
die() { log "$*"; printf '{"bench_peers":true,"ok":false,"error":"%s"}\n' "$(printf '%s' "$*" | tr -d '"\\' | tr '\t\r\n' '   ')"; exit 2; }
trap 'die "failed at line $LINENO (exit $?); see stderr"' ERR
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a whole number ≥ 1"
for s in $SYSTEMS; do case $s in strom|strom-fluss|fluss|kafka) ;; *) die "SYSTEMS: unknown system $s" ;; esac; done
[[ $WIDE_N =~ ^[0-9]+$ ]] || die "WIDE_N must be a whole number"
command -v go >/dev/null || die "go not found"
mkdir -p "$SBS" "$OUT_DIR"

# --- the box: is it quiet? -------------------------------------------------------------------
cpu_busy() { # percent of CPU time not idle (idle + iowait) over 2 s, from /proc/stat
  local a b
  a=$(awk '/^cpu / { print $2+$3+$4+$5+$6+$7+$8+$9, $5+$6 }' /proc/stat); sleep 2
  b=$(awk '/^cpu / { print $2+$3+$4+$5+$6+$7+$8+$9, $5+$6 }' /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " "); t = y[1] - x[1]; i = y[2] - x[2]
    printf "%.1f", (t > 0 ? 100 * (t - i) / t : 0) }'
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
hogs() { ps -eo pcpu=,pid=,args= --sort=-pcpu | awk '$1 >= 10 && n++ < 5' | cut -c1-150; } # no head: its SIGPIPE would fail the pipe
wait_quiet() { # WHAT: wait up to QUIET_WAIT s for CPU busy <= BUSY_MAX
  local b t0=$SECONDS
  while :; do
    b=$(cpu_busy)
    awk -v b="$b" -v m="$BUSY_MAX" 'BEGIN { exit !(b <= m) }' && { BUSY=$b; return 0; }
    if (( SECONDS - t0 >= QUIET_WAIT )); then
      log "WARNING: the box is busy (${b}% CPU, load $(loadavg)) after ${QUIET_WAIT}s of waiting, before $1:"
      hogs | sed 's/^/[bench-peers]   /' >&2
      [ "$STRICT" = 1 ] && die "the box is not quiet (${b}% CPU busy > BUSY_MAX=$BUSY_MAX) before $1"
      BUSY=$b; return 0
    fi
    log "busy (${b}% CPU, load $(loadavg)) before $1; waiting"; sleep 5
  done
}
log "uptime: $(uptime)"
log "processes at ≥10% CPU: $(hogs | wc -l)"; hogs | sed 's/^/[bench-peers]   /' >&2

# --- build: strom and peerbench from this checkout ---------------------------------------------
STROM_REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
# GIT_OPTIONAL_LOCKS=0: status must not refresh (write) the checkout's index
if [ -n "$(GIT_OPTIONAL_LOCKS=0 git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]; then STROM_REV=$STROM_REV-dirty; fi
log "building strom and peerbench ($ROOT at $STROM_REV)"
(cd "$ROOT" && go build -o "$SBS/strom" . && go build -o "$SBS/peerbench" ./internal/peerbench) >&2 || die "go build failed"

# --- one system --------------------------------------------------------------------------------
free_port() { local p; for _ in $(seq 100); do p=$((PORT_MIN + RANDOM % (PORT_MAX - PORT_MIN + 1)))
  (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }; done; return 1; }
NODE_PID=""; NODE_DIR=""
stop_node() {
  if [ -n "$NODE_PID" ] && kill -0 "$NODE_PID" 2>/dev/null; then
    kill "$NODE_PID" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$NODE_PID" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$NODE_PID" 2>/dev/null || true
  fi
  [ -n "$NODE_PID" ] && { wait "$NODE_PID" 2>/dev/null || true; }
  NODE_PID=""
  [ -n "$NODE_DIR" ] && rm -rf "$NODE_DIR"; NODE_DIR=""
}
trap stop_node EXIT

start_strom() { # LOG [FLUSS]: a fresh node with the defaults (FLUSS: with a fluss.listen too); sets NODE_API, NODE_FLUSS
  local raft gossip fl=() i
  NODE_API=$(free_port); raft=$(free_port); gossip=$(free_port); NODE_FLUSS=""
  [ -z "${2:-}" ] || { NODE_FLUSS=$(free_port); fl=(--fluss-listen "127.0.0.1:$NODE_FLUSS"); }
  [ "$(printf '%s\n' "$NODE_API" "$raft" "$gossip" "$NODE_FLUSS" | sort -u | wc -l)" = 4 ] ||
    { raft=$(free_port); gossip=$(free_port); [ -z "$NODE_FLUSS" ] || { NODE_FLUSS=$(free_port); fl=(--fluss-listen "127.0.0.1:$NODE_FLUSS"); }; }
  NODE_DIR=$(mktemp -d "$SBS/strom-run.XXXXXX")
  # no STROM_* configuration from this environment
  # shellcheck disable=SC2046 # one -u NAME per variable
  env $(env | sed -n 's/^\(STROM_[A-Z0-9_]*\)=.*/-u \1/p') "$SBS/strom" server --data-dir "$NODE_DIR/data" \
    --listen "127.0.0.1:$NODE_API" --raft-listen "127.0.0.1:$raft" --gossip-listen "127.0.0.1:$gossip" "${fl[@]}" > "$NODE_DIR/server.log" 2>&1 &
  NODE_PID=$!
  for i in $(seq 300); do
    curl -sf "http://127.0.0.1:$NODE_API/readyz" >/dev/null 2>&1 && break
    kill -0 "$NODE_PID" 2>/dev/null || { tail -n 20 "$NODE_DIR/server.log" >&2; START_ERR="node exited during startup"; stop_node; return 1; }
    sleep 0.1
  done
  [ "$i" -lt 300 ] || { START_ERR="node not ready after 30 s"; stop_node; return 1; }
  echo "[bench-peers] strom node ready on 127.0.0.1:$NODE_API${NODE_FLUSS:+ (fluss.listen 127.0.0.1:$NODE_FLUSS)} in $((i / 10)).$((i % 10)) s" >> "$1"
}
end_strom() { # LOG RC: the node's log kept, the node stopped; exit code RC (3 if the node died)
  local rc=$2
  kill -0 "$NODE_PID" 2>/dev/null || { echo "[bench-peers] the strom node died during the run" >> "$1"; [ "$rc" != 0 ] || rc=3; }
  cp "$NODE_DIR/server.log" "${1%.log}-server.log" 2>/dev/null || true
  stop_node
  return "$rc"
}
run_strom() { # OUT LOG: Strom's Go client (internal/peerbench)
  start_strom "$2" || { printf '{"peer":"strom","ok":false,"error":"%s"}\n' "$START_ERR" > "$1"; return 1; }
  local rc=0
  # (peerbench's experiment knobs leave the paired workload: never from here)
  env -u SCAN_ROWS STROM_VERSION="$STROM_REV" DATA_DIR="$NODE_DIR/data" SERVER_PIDS="$NODE_PID" N="$N" KV_N="$KV_N" WIDE_N="$WIDE_N" \
    timeout 600 "$SBS/peerbench" bench "127.0.0.1:$NODE_API" > "$1" 2>> "$2" || rc=$?
  end_strom "$2" "$rc"
}
run_strom_fluss() { # OUT LOG: Fluss's Java client, FlussBench.java as for fluss, against the node's fluss.listen
  start_strom "$2" fluss || { printf '{"peer":"strom-fluss","ok":false,"error":"%s"}\n' "$START_ERR" > "$1"; return 1; }
  local rc=0
  env -u PORT -u DATA_DIR MODE=bench TARGET="127.0.0.1:$NODE_FLUSS" SERVER_PIDS="$NODE_PID" PEER=strom-fluss PEER_VERSION="$STROM_REV" \
    N="$N" KV_N="$KV_N" WIDE_N="$WIDE_N" PEERS_DIR="$PEERS_DIR" timeout 900 bash "$PEERS/fluss.sh" > "$1" 2>> "$2" || rc=$?
  end_strom "$2" "$rc"
}
run_fluss() { env -u PORT -u SERVER_PIDS MODE=bench N="$N" KV_N="$KV_N" WIDE_N="$WIDE_N" PEERS_DIR="$PEERS_DIR" timeout 900 bash "$PEERS/fluss.sh" > "$1" 2> "$2"; }
run_kafka() { env -u PORT -u CONTROLLER_PORT -u SIZE -u PARTITIONS -u POOL -u PRODUCER_PROPS WORKLOAD=wide N="$N" ACKS=all \
  PEERS_DIR="$PEERS_DIR" timeout 900 bash "$PEERS/kafka.sh" > "$1" 2> "$2"; }

# --- the rounds --------------------------------------------------------------------------------
read -r -a SYS <<< "$SYSTEMS"
INDEX=$OUT_DIR/index.tsv; : > "$INDEX"
log "$ROUNDS round(s) of: ${SYS[*]} (order rotates); N=$N KV_N=$KV_N; outputs and logs in $OUT_DIR"
T0=$SECONDS
for ((r = 1; r <= ROUNDS; r++)); do
  ORDER=(); for ((i = 0; i < ${#SYS[@]}; i++)); do ORDER+=("${SYS[$(( (i + r - 1) % ${#SYS[@]} ))]}"); done
  log "round $r/$ROUNDS: ${ORDER[*]}"
  TR=$SECONDS
  for ((p = 0; p < ${#ORDER[@]}; p++)); do
    s=${ORDER[$p]}
    sync # the previous system's dirty pages are written back before this one starts
    wait_quiet "$s (round $r)"
    LOAD=$(loadavg)
    log "round $r: $s (CPU busy ${BUSY}%, load $LOAD)"
    out=$OUT_DIR/r$r-$s.json; lg=$OUT_DIR/r$r-$s.log; t=$SECONDS; rc=0
    "run_${s//-/_}" "$out" "$lg" || rc=$?
    [ "$rc" = 0 ] || { log "round $r: $s FAILED (exit $rc); last lines of $lg:"; tail -n 15 "$lg" | cut -c1-300 >&2; }
    log "round $r: $s done in $((SECONDS - t)) s: $(grep '^{' "$out" | tail -n 1 | cut -c1-200)"
    printf '%d\t%d\t%s\t%s\t%s\t%d\t%d\t%s\n' "$r" "$((p + 1))" "$s" "$BUSY" "$LOAD" "$((SECONDS - t))" "$rc" "$out" >> "$INDEX"
  done
  log "round $r took $((SECONDS - TR)) s"
done
log "all rounds took $((SECONDS - T0)) s; load now $(loadavg)"
trap - ERR
"$SBS/peerbench" report "$INDEX" | tee "$OUT_DIR/report.txt"
