#!/usr/bin/env bash
# The Curator differential suite: the Java ZooKeeper client and Curator's recipes, run against a
# real ZooKeeper and against Strom's ZooKeeper shim, with the transcripts compared.
#
#   scripts/zkdiff.sh [SCENARIO...]     (default: every scenario of scripts/zkdiff/ZkDiff.java)
#
# scripts/zkdiff/ZkDiff.java runs a fixed list of scenarios (every opcode go-zookeeper lacks
# through the Java client API; reconnects with setWatches2, session takeover and expiry;
# CuratorCache (also bridged to a PathChildrenCacheListener), background batches, transactions,
# DistributedAtomicLong, LeaderLatch, LeaderSelector, InterProcessMutex, PersistentNode,
# SharedCount)
# against one connect string and prints a normalized transcript:
# one line per reply or event, zxids and session ids replaced by symbols in order of first
# appearance. This script runs it against the real ZooKeeper (STROM_ZK_ADDR when set, else a
# private one from scripts/zookeeper.sh, stopped at exit), then against a Strom node started with
# `strom server --zookeeper-listen` (go build; a temp data dir; free loopback ports), and diffs.
# ZKDIFF_CLUSTER=1 also runs it against a three-node Strom cluster (~75 s in all): the first
# client of each step on a follower, the second (B, a cache's writer, ...) on the leader.
# Exit 0: zero divergences; 1: the transcripts differ (the diff is printed, ZooKeeper's side
# first); 2: the driver failed against the real ZooKeeper (the reference) or nothing could start.
#
# Install (idempotent, into $STROM_ZKDIFF_CACHE, default ~/.cache/strom/zkdiff): mvn resolves
# scripts/zkdiff/pom.xml's dependencies (zookeeper 3.8 and curator-recipes 5, 12 MB, ~5 s once)
# and javac compiles ZkDiff.java when it or the pom changes. Needs Java 11+, javac, mvn, and for
# a private ZooKeeper Debian's zookeeper package (scripts/zookeeper.sh installs it).
# Time (2-core box, 2026-12-01): ~20 s per transcript (a session left to expire takes ~6 s),
# both run at once: ~35 s in all once installed, go build included.
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=$ROOT/scripts/zkdiff
CACHE=${STROM_ZKDIFF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strom/zkdiff}

log() { echo "zkdiff.sh: $*" >&2; }
die() { log "$*"; exit 2; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
flw() { (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf '%s' "$2" >&3 && timeout 2 cat <&3) 2>/dev/null || true; }
# free_port: a loopback port nobody listens on that this run has not handed out yet. It runs in
# $(...) subshells, so the ports handed out are kept in a file of the run's dir ($SCRATCH), not in
# a variable, which each subshell lost (two listeners of one node could get the same port).
free_port() {
  local p taken=$SCRATCH/ports-taken; for _ in $(seq 100); do p=$((10000 + RANDOM % 22000))
    grep -qxF "$p" "$taken" 2>/dev/null || listening "$p" || { echo "$p" >> "$taken"; echo "$p"; return 0; }; done
  die "no free loopback port"; }

# --- install (idempotent) ---------------------------------------------------------------------
command -v java >/dev/null && command -v javac >/dev/null || die "java and javac are needed (openjdk-17-jdk-headless)"
LIBS=$CACHE/libs-$(sha256sum "$SRC/pom.xml" | cut -c1-16)
if [ ! -f "$LIBS/.complete" ]; then
  command -v mvn >/dev/null || die "mvn is needed to resolve the ZooKeeper and Curator jars (Debian: maven)"
  log "resolving $SRC/pom.xml's dependencies with mvn into $LIBS"
  rm -rf "$CACHE"/libs-*; mkdir -p "$CACHE"
  timeout 600 mvn -B -q -f "$SRC/pom.xml" -Dmaven.repo.local="$CACHE/m2" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DoutputDirectory="$LIBS" -DincludeScope=runtime > "$CACHE/mvn.log" 2>&1 ||
    { grep -m 3 ERROR "$CACHE/mvn.log" >&2 || true; die "mvn could not resolve the jars; see $CACHE/mvn.log"; }
  touch "$LIBS/.complete"
fi
CP=$(printf '%s:' "$LIBS"/*.jar)
CLASSES=$CACHE/classes-$(cat "$SRC/ZkDiff.java" "$SRC/pom.xml" | sha256sum | cut -c1-16)
if [ ! -f "$CLASSES/ZkDiff.class" ]; then
  log "javac $SRC/ZkDiff.java"
  rm -rf "$CACHE"/classes-*; mkdir -p "$CLASSES"
  javac -nowarn -d "$CLASSES" -cp "$CP" "$SRC/ZkDiff.java" >&2 || { rm -rf "$CLASSES"; die "javac ZkDiff.java failed"; }
fi

# --- servers ----------------------------------------------------------------------------------
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/strom-zkdiff.XXXXXX")
PIDS=() ZK_DIR=
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true
  done
  if [ -n "$ZK_DIR" ]; then STROM_ZK_DIR=$ZK_DIR "$ROOT/scripts/zookeeper.sh" stop >/dev/null 2>&1 || true; fi
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "${STROM_ZK_ADDR:-}" ]; then
  ZK_ADDR=$STROM_ZK_ADDR
else
  ZK_DIR=$SCRATCH/zookeeper
  ZK_ADDR=$(STROM_ZK_DIR=$ZK_DIR "$ROOT/scripts/zookeeper.sh" start) || die "scripts/zookeeper.sh start failed"
fi

log "go build strom"
(cd "$ROOT" && go build -o "$SCRATCH/strom" .) || die "go build failed"

# node NAME ZKPORT [FLAGS...]: start `strom server` with its own data dir and free ports
node() {
  local name=$1 zk=$2; shift 2
  "$SCRATCH/strom" server --data-dir "$SCRATCH/$name.data" --listen "127.0.0.1:$(free_port)" \
    --raft-listen "127.0.0.1:$(free_port)" --zookeeper-listen "127.0.0.1:$zk" "$@" > "$SCRATCH/$name.log" 2>&1 &
  PIDS+=($!)
}
# wait_mode NAME ZKPORT MODES: until srvr on ZKPORT reports one of MODES (a regexp)
wait_mode() {
  local i
  for i in $(seq 600); do
    flw "$2" srvr | grep -q -E "^Mode: ($3)" && return 0
    kill -0 "${PIDS[0]}" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 20 "$SCRATCH/$1.log" >&2; die "$1 did not report mode $3 on :$2"
}

TARGETS=(strom)
ZKP=$(free_port)
node strom "$ZKP"
ADDR_strom=127.0.0.1:$ZKP
if [ "${ZKDIFF_CLUSTER:-0}" = 1 ]; then
  # a three-node cluster: the driver's first clients talk to a follower (writes forwarded to
  # the leader), the second client of each two-client step to the leader
  TARGETS+=(follower)
  G=("$(free_port)" "$(free_port)" "$(free_port)") CZK=("$(free_port)" "$(free_port)" "$(free_port)")
  JOIN=127.0.0.1:${G[0]},127.0.0.1:${G[1]},127.0.0.1:${G[2]}
  export STROM_CLUSTER_SECRET=${STROM_CLUSTER_SECRET:-$(head -c 32 /dev/urandom | base64)}
  for n in 1 2 3; do
    node "node$n" "${CZK[$((n - 1))]}" --node-id "$n" --gossip-listen "127.0.0.1:${G[$((n - 1))]}" \
      --join "$JOIN" --bootstrap-expect 3
  done
  ADDR_follower=
  for i in $(seq 600); do # until one node leads and two follow it
    modes=$(for p in "${CZK[@]}"; do flw "$p" srvr | sed -n "s/^Mode: /$p /p"; done)
    if [ "$(grep -c ' leader$' <<< "$modes")" = 1 ] && [ "$(grep -c ' follower$' <<< "$modes")" = 2 ]; then
      ADDR_follower=127.0.0.1:$(grep -m 1 ' follower$' <<< "$modes" | cut -d' ' -f1)
      OTHER_follower=127.0.0.1:$(grep -m 1 ' leader$' <<< "$modes" | cut -d' ' -f1); break
    fi
    sleep 0.1
  done
  [ -n "$ADDR_follower" ] || { tail -n 20 "$SCRATCH"/node*.log >&2; die "the three-node cluster did not form"; }
fi
wait_mode strom "$ZKP" standalone

# --- transcripts ------------------------------------------------------------------------------
drive() { # NAME ADDR OTHER: the transcript to $SCRATCH/NAME.txt; the driver's exit code
  local rc=0
  timeout 300 java -Xmx256m -Dzkdiff.other="$3" -cp "$CLASSES:$CP" ZkDiff "$2" "${@:4}" \
    > "$SCRATCH/$1.txt" 2> "$SCRATCH/$1.err" || rc=$?
  return $rc
}
# all at once: every step waits for its outcome, so no transcript depends on timing
log "driver against ZooKeeper at $ZK_ADDR and against Strom: $(for t in "${TARGETS[@]}"; do a=ADDR_$t o=OTHER_$t; printf '%s at %s (second clients at %s); ' "$t" "${!a}" "${!o:-${!a}}"; done)"
declare -A JOB
drive zookeeper "$ZK_ADDR" "$ZK_ADDR" "$@" & JOB[zookeeper]=$!
for t in "${TARGETS[@]}"; do a=ADDR_$t o=OTHER_$t; drive "$t" "${!a}" "${!o:-${!a}}" "$@" & JOB[$t]=$!; done
ZK_RC=0; wait "${JOB[zookeeper]}" || ZK_RC=$?
if [ "$ZK_RC" -ne 0 ]; then
  cat "$SCRATCH/zookeeper.txt" >&2; tail -n 20 "$SCRATCH/zookeeper.err" >&2
  die "the driver failed against the real ZooKeeper (the reference): a problem of the driver or the ZooKeeper, not of Strom"
fi
scenarios=$(grep -c '^== ' "$SCRATCH/zookeeper.txt" || true)
RC=0
for t in "${TARGETS[@]}"; do
  wait "${JOB[$t]}" || log "the driver failed against $t (see the diff)"
  if diff -u --label zookeeper --label "$t" "$SCRATCH/zookeeper.txt" "$SCRATCH/$t.txt"; then
    log "PASS $t: $scenarios scenarios, $(wc -l < "$SCRATCH/zookeeper.txt") transcript lines, zero divergences"
  else
    tail -n 20 "$SCRATCH/$t.err" >&2
    log "FAIL $t: the shim diverges from ZooKeeper (diff above: - ZooKeeper, + $t)"
    RC=1
  fi
done
exit $RC
