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
PORTS=()
free_port() { # below Linux's ephemeral range, so no client socket holds it
  local p; for _ in $(seq 100); do p=$((10000 + RANDOM % 22000))
    [[ " ${PORTS[*]} " == *" $p "* ]] || listening "$p" || { PORTS+=("$p"); echo "$p"; return 0; }; done
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
STROM_PID= ZK_DIR=
cleanup() {
  if [ -n "$STROM_PID" ]; then
    kill "$STROM_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$STROM_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$STROM_PID" 2>/dev/null || true; wait "$STROM_PID" 2>/dev/null || true
  fi
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
API=$(free_port); RAFT=$(free_port); ZKP=$(free_port)
"$SCRATCH/strom" server --data-dir "$SCRATCH/strom-data" --listen "127.0.0.1:$API" \
  --raft-listen "127.0.0.1:$RAFT" --zookeeper-listen "127.0.0.1:$ZKP" > "$SCRATCH/strom.log" 2>&1 &
STROM_PID=$!
for i in $(seq 300); do
  [ "$(flw "$ZKP" ruok)" = imok ] && break
  kill -0 "$STROM_PID" 2>/dev/null && [ "$i" -lt 300 ] || { tail -n 20 "$SCRATCH/strom.log" >&2; die "strom server did not answer ruok on :$ZKP"; }
  sleep 0.1
done

# --- transcripts ------------------------------------------------------------------------------
drive() { # NAME ADDR: the transcript to $SCRATCH/NAME.txt; the driver's exit code
  local rc=0
  timeout 300 java -Xmx256m -cp "$CLASSES:$CP" ZkDiff "$2" "${@:3}" > "$SCRATCH/$1.txt" 2> "$SCRATCH/$1.err" || rc=$?
  return $rc
}
# both at once: every step waits for its outcome, so neither transcript depends on timing
log "driver against ZooKeeper at $ZK_ADDR and against the Strom shim at 127.0.0.1:$ZKP"
drive zookeeper "$ZK_ADDR" "$@" & ZK_JOB=$!
drive strom "127.0.0.1:$ZKP" "$@" & STROM_JOB=$!
ZK_RC=0 STROM_RC=0
wait "$ZK_JOB" || ZK_RC=$?
wait "$STROM_JOB" || STROM_RC=$?
if [ "$ZK_RC" -ne 0 ]; then
  cat "$SCRATCH/zookeeper.txt" >&2; tail -n 20 "$SCRATCH/zookeeper.err" >&2
  die "the driver failed against the real ZooKeeper (the reference): a problem of the driver or the ZooKeeper, not of Strom"
fi
[ "$STROM_RC" -eq 0 ] || log "the driver failed against the shim (see the diff)"

scenarios=$(grep -c '^== ' "$SCRATCH/zookeeper.txt" || true)
if diff -u --label zookeeper --label strom "$SCRATCH/zookeeper.txt" "$SCRATCH/strom.txt"; then
  log "PASS: $scenarios scenarios, $(wc -l < "$SCRATCH/zookeeper.txt") transcript lines, zero divergences"
  exit 0
fi
tail -n 20 "$SCRATCH/strom.err" >&2
log "FAIL: the shim diverges from ZooKeeper (diff above: - ZooKeeper, + Strom)"
exit 1
