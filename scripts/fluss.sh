#!/usr/bin/env bash
# The reference deployment: real Apache Fluss servers (a CoordinatorServer and a TabletServer)
# whose ZooKeeper is a Strom node's shim, checked with the real Fluss Java client.
#
#   scripts/fluss.sh [both|zookeeper|strom]
#
#   zookeeper  Fluss on a real ZooKeeper: a private one from scripts/zookeeper.sh (own dir, free
#              port, stopped at exit), or STROM_ZK_ADDR when set (left running). This is the
#              reference: when it fails, the problem is Fluss or this script, not Strom.
#   strom      Fluss on Strom: `go build` the binary and start `strom server --zookeeper-listen`
#              on free loopback ports with its own data dir; Fluss's zookeeper.address points there.
#   both       (default) zookeeper, then strom; a summary line for each.
#
# Each run starts the CoordinatorServer, waits until it has registered as leader, starts
# TabletServer 0, waits until the coordinator has seen it (its ZooKeeper child watch), then runs
# scripts/fluss/FlussCheck.java: create a database, a log table and a primary-key table, append
# 1000 rows and read them back (all columns, and one column projected), list offsets, upsert and
# look up, drop. Exit 0 only when every run passed; 1 when a check failed; 2 when a server did not
# come up or the install failed. Every process it starts is stopped by its PID from an EXIT trap.
#
# Install (idempotent, into $STROM_FLUSS_CACHE, default ~/.cache/strom/fluss): mvn resolves
# org.apache.fluss:fluss-server and fluss-client $FLUSS_VERSION plus the log4j2 jars Fluss's
# distribution ships (151 MB, ~15 s once), and javac compiles FlussCheck.java when it changes.
# Needs Java 11+, javac, mvn, python3 (ZK_TRACE only) and, for `zookeeper`, Debian's zookeeper.
#
# Time on the shared 2-core box (2026-12-01): ~15 s per passing run once installed (three JVMs
# start; the cluster is ready in ~6 s), plus ~12 s for the first mvn resolve; a CoordinatorServer
# that cannot keep its ZooKeeper session exits after ~45 s, one that hangs fails after the 90 s
# readiness timeout. scripts/test.sh (so CI) runs `both`, against its private ZooKeeper.
#
# Env: FLUSS_VERSION (0.9.1-incubating), ROWS (1000), ZK_ROOT (zookeeper.path.root, /fluss),
#      CS_HEAP (512m), TS_HEAP (1g), CLIENT_HEAP (512m), STROM_ZK_ADDR (an external ZooKeeper for
#      `zookeeper`), ZK_TRACE (1: put scripts/fluss/zktrace.py between Fluss and its ZooKeeper, log
#      every request and reply to logs/zk-trace.log and print the last exchanges before the first
#      connection the Fluss side dropped), LOGS_OUT (copy each run's logs to LOGS_OUT/<target>),
#      STROM_FLUSS_CACHE.
set -Eeuo pipefail

TARGETS=${1:-both}
case $TARGETS in both) TARGETS="zookeeper strom" ;; zookeeper|strom) ;;
  *) echo "usage: $0 [both|zookeeper|strom]" >&2; exit 2 ;; esac
FLUSS_VERSION=${FLUSS_VERSION:-0.9.1-incubating}; LOG4J_VERSION=2.25.4; SLF4J_VERSION=1.7.36
ROWS=${ROWS:-1000}; ZK_ROOT=${ZK_ROOT:-/fluss}
CS_HEAP=${CS_HEAP:-512m}; TS_HEAP=${TS_HEAP:-1g}; CLIENT_HEAP=${CLIENT_HEAP:-512m}
CACHE=${STROM_FLUSS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strom/fluss}
FDIR=$CACHE/$FLUSS_VERSION; LIBS=$FDIR/libs
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd); SRC=$ROOT/scripts/fluss/FlussCheck.java

log() { echo "fluss.sh: $*" >&2; }
die() { log "$*"; exit 2; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
flw() { (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf '%s' "$2" >&3 && timeout 2 cat <&3) 2>/dev/null || true; }
alive() { kill -0 "$1" 2>/dev/null; }
PORTS=() # handed out this run, so no two servers get the same one
free_port() { # below Linux's ephemeral range, so no client socket holds it
  local p; for _ in $(seq 100); do p=$((10000 + RANDOM % 22000))
    [[ " ${PORTS[*]} " == *" $p "* ]] || listening "$p" || { PORTS+=("$p"); echo "$p"; return 0; }; done
  die "no free loopback port"; }

# --- install (idempotent) ---------------------------------------------------------------------
command -v java >/dev/null && command -v javac >/dev/null || die "java and javac are needed (openjdk-17-jdk-headless)"
JMAJ=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | sed -n 1p)
[ "${JMAJ:-0}" -ge 11 ] || die "Java ${JMAJ:-?} found; Fluss $FLUSS_VERSION needs Java 11+"
if [ ! -f "$LIBS/.complete" ]; then
  command -v mvn >/dev/null || die "mvn is needed to resolve the Fluss jars (Debian: maven)"
  mkdir -p "$FDIR"
  dep() { echo "<dependency><groupId>$1</groupId><artifactId>$2</artifactId><version>$3</version></dependency>"; }
  # fluss-server and fluss-client are shaded jars; fluss-dist's lib/ adds the log4j2 binding.
  cat > "$FDIR/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>local.strom</groupId><artifactId>fluss-check</artifactId><version>1</version><packaging>pom</packaging>
<dependencies>
$(dep org.apache.fluss fluss-server "$FLUSS_VERSION")
$(dep org.apache.fluss fluss-client "$FLUSS_VERSION")
$(dep org.slf4j slf4j-api "$SLF4J_VERSION")
$(dep org.apache.logging.log4j log4j-api "$LOG4J_VERSION")
$(dep org.apache.logging.log4j log4j-core "$LOG4J_VERSION")
$(dep org.apache.logging.log4j log4j-slf4j-impl "$LOG4J_VERSION")
$(dep org.apache.logging.log4j log4j-1.2-api "$LOG4J_VERSION")
</dependencies></project>
EOF
  log "resolving fluss-server and fluss-client $FLUSS_VERSION with mvn into $LIBS"
  rm -rf "$LIBS"
  timeout 900 mvn -B -q -f "$FDIR/pom.xml" -Dmaven.repo.local="$CACHE/m2" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DoutputDirectory="$LIBS" -DincludeScope=runtime > "$FDIR/mvn.log" 2>&1 ||
    { grep -m 3 ERROR "$FDIR/mvn.log" >&2 || true; die "mvn could not resolve the Fluss jars; see $FDIR/mvn.log"; }
  touch "$LIBS/.complete"
fi
jar() { local f; for f in "$LIBS/$1"-[0-9]*.jar; do [ -f "$f" ] && { echo "$f"; return 0; }; done
  die "no $1 jar in $LIBS (remove $LIBS/.complete to resolve again)"; }
L4J="$(jar log4j-api):$(jar log4j-core):$(jar log4j-slf4j-impl)"
SERVER_CP="$(jar fluss-server):$L4J:$(jar log4j-1.2-api)" # the shaded jars overlap: one each
CLASSES=$FDIR/check-classes-$(sha256sum "$SRC" | cut -c1-16)
if [ ! -f "$CLASSES/FlussCheck.class" ]; then
  log "javac $SRC"
  rm -rf "$FDIR"/check-classes-*; mkdir -p "$CLASSES"
  javac -nowarn -d "$CLASSES" -cp "$(jar fluss-client)" "$SRC" >&2 || { rm -rf "$CLASSES"; die "javac FlussCheck.java failed"; }
fi
CLIENT_CP="$CLASSES:$(jar fluss-client):$L4J:$(jar slf4j-api)"

# --- processes ----------------------------------------------------------------------------------
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/strom-fluss.XXXXXX")
PIDS=()  # started this run, in start order; stopped in reverse
ZK_DIR=  # set while a private ZooKeeper of scripts/zookeeper.sh runs
stop_all() {
  local i p
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    p=${PIDS[$i]}
    kill "$p" 2>/dev/null || continue # TabletServer first, while the coordinator still answers
    for _ in $(seq 60); do alive "$p" || break; sleep 0.5; done
    kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true
  done
  PIDS=()
  if [ -n "$ZK_DIR" ]; then STROM_ZK_DIR=$ZK_DIR "$ROOT/scripts/zookeeper.sh" stop 2>/dev/null || true; ZK_DIR=; fi
}
trap 'stop_all; rm -rf "$SCRATCH"' EXIT
trap 'exit 130' INT TERM

JVM=(-XX:+UseG1GC -Djava.awt.headless=true --add-opens=java.base/java.nio=ALL-UNNAMED) # Arrow on Java 17
cat > "$SCRATCH/log4j2.properties" <<'EOF'
rootLogger.level = INFO
rootLogger.appenderRef.f.ref = F
appender.f.name = F
appender.f.type = File
appender.f.fileName = ${sys:log.file}
appender.f.layout.type = PatternLayout
appender.f.layout.pattern = %d{HH:mm:ss,SSS} %-5p %c{1} [%t] - %m%n
EOF
L4JOPT=(-Dlog4j.configurationFile="file:$SCRATCH/log4j2.properties" -Dlog4j2.shutdownHookEnabled=false)

# why each Fluss server's ZooKeeper client dropped a connection, then its first ERRORs
server_errors() {
  local f; for f in "$WORK"/logs/coordinator.log "$WORK"/logs/tablet.log; do
    [ -f "$f" ] || continue
    { grep -m 1 -A 4 -E 'WARN  ClientCnxn .*Closing socket connection' "$f" || true
      grep -m 2 -A 1 -E ' ERROR | FATAL ' "$f" || true; } | grep -v '^--$' | sed "s|^|  $(basename "$f"): |" | cut -c1-300
  done; }
# the last exchanges on the first connection with a session that the Fluss side closed
zk_trace_summary() {
  local t=$WORK/logs/zk-trace.log c
  [ -f "$t" ] || return 0
  c=$(awk '$3 == "C>" && $4 == "session" { s[$2] = 1 } $3 == "C>" && $4 == "EOF" && s[$2] { print $2; exit }' "$t")
  [ -n "$c" ] || return 0
  awk -v c="$c" '$2 == c && $3 ~ /[<>]$/ { l[n++] = $0 } $2 == c && $3 == "C>" && $4 == "EOF" { exit }
    END { s = n > 8 ? n - 8 : 0; printf "  zk trace: connection %s closed by the Fluss side after:\n", c
          for (i = s; i < n; i++) { x = l[i]; sub(/^[^ ]+ [^ ]+ /, "", x); printf "    %s\n", x } }' "$t"
}
# FAILED WHY: print the evidence and end this run (the summary line comes from the caller)
report_failure() {
  local f
  for f in "$WORK"/logs/*.log "$WORK"/logs/*.out; do
    [ -s "$f" ] && case $f in *zk-trace.log) ;; *) echo "--- $f (last 15 lines)" >&2; tail -n 15 "$f" | cut -c1-300 >&2 ;; esac
  done
  echo "--- why (server logs)" >&2; server_errors >&2; zk_trace_summary >&2
  WHY=$1; log "$TARGET: $1"
}

# ZooKeeper for TARGET: sets ZK_ADDR and ZK_DESC
start_zookeeper() {
  if [ "$TARGET" = zookeeper ]; then
    if [ -n "${STROM_ZK_ADDR:-}" ]; then ZK_ADDR=$STROM_ZK_ADDR; ZK_DESC="ZooKeeper at $ZK_ADDR"; return; fi
    ZK_DIR=$WORK/zookeeper
    ZK_ADDR=$(STROM_ZK_DIR=$ZK_DIR "$ROOT/scripts/zookeeper.sh" start) || { report_failure "scripts/zookeeper.sh start failed"; return 1; }
    ZK_DESC="ZooKeeper $(dpkg-query -W -f '${Version}' zookeeper 2>/dev/null || echo '?') at $ZK_ADDR"
    return
  fi
  log "go build strom"
  (cd "$ROOT" && go build -o "$WORK/strom" .) || { report_failure "go build failed"; return 1; }
  local api raft zk i
  api=$(free_port); raft=$(free_port); zk=$(free_port)
  "$WORK/strom" server --data-dir "$WORK/strom-data" --listen "127.0.0.1:$api" \
    --raft-listen "127.0.0.1:$raft" --zookeeper-listen "127.0.0.1:$zk" > "$WORK/logs/strom.log" 2>&1 &
  PIDS+=($!)
  for i in $(seq 300); do
    [ "$(flw "$zk" ruok)" = imok ] && break
    alive "${PIDS[-1]}" && [ "$i" -lt 300 ] || { report_failure "strom server did not answer ruok on :$zk"; return 1; }
    sleep 0.1
  done
  ZK_ADDR=127.0.0.1:$zk; ZK_DESC="Strom $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null)$(cd "$ROOT" && git diff --quiet HEAD 2>/dev/null || echo '+local changes') shim at $ZK_ADDR"
}

start_trace() { # put the tracing proxy in front of ZK_ADDR
  local port; port=$(free_port)
  python3 "$ROOT/scripts/fluss/zktrace.py" "$port" "$ZK_ADDR" "$WORK/logs/zk-trace.log" > "$WORK/logs/zktrace.out" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 50); do listening "$port" && break; sleep 0.1; done
  listening "$port" || { report_failure "the ZK_TRACE proxy did not start"; return 1; }
  log "ZK_TRACE: Fluss uses 127.0.0.1:$port, a tracing proxy to $ZK_ADDR"
  ZK_ADDR=127.0.0.1:$port
}

write_conf() { # NAME PORT [EXTRA LINES]: the keys of fluss-dist's conf/server.yaml
  mkdir -p "$WORK/conf/$1"
  { echo "zookeeper.address: $ZK_ADDR"
    echo "zookeeper.path.root: $ZK_ROOT"
    echo "bind.listeners: FLUSS://127.0.0.1:$2"
    echo "default.bucket.number: 1"
    echo "default.replication.factor: 1"
    echo "data.dir: $WORK/data/$1"
    echo "remote.data.dir: $WORK/remote"
    [ $# -gt 2 ] && printf '%s\n' "${@:3}"; true; } > "$WORK/conf/$1/server.yaml"
}
start_fluss() { # NAME HEAP CLASS
  java -Xmx"$2" -Xms"$2" "${JVM[@]}" -Djava.io.tmpdir="$WORK/tmp" "${L4JOPT[@]}" -Dlog.file="$WORK/logs/$1.log" \
    -cp "$SERVER_CP" "$3" --configDir "$WORK/conf/$1" > "$WORK/logs/$1.out" 2>&1 &
  PIDS+=($!)
}
wait_log() { # NAME PORT PATTERN SECONDS WHAT: the port answers and the log has PATTERN
  local pid=${PIDS[-1]} i
  for i in $(seq $(($4 * 5))); do
    [ -z "$2" ] || listening "$2" && grep -q -E "$3" "$WORK/logs/$1.log" 2>/dev/null && return 0
    alive "$pid" || { report_failure "$5 exited during startup"; return 1; }
    sleep 0.2
  done
  report_failure "$5 not ready after $4 s (no '$3' in $1.log)"; return 1
}

# run TARGET: one deployment and the check; prints its summary line to SUMMARY
run() {
  TARGET=$1; WORK=$SCRATCH/$TARGET; mkdir -p "$WORK/logs" "$WORK/tmp"
  local t0 cs ts rc out; t0=$(date +%s)
  start_zookeeper || return 2
  [ "${ZK_TRACE:-0}" != 1 ] || start_trace || return 2
  log "$TARGET: Fluss $FLUSS_VERSION on $ZK_DESC"
  cs=$(free_port); ts=$(free_port)
  write_conf coordinator "$cs"
  start_fluss coordinator "$CS_HEAP" org.apache.fluss.server.coordinator.CoordinatorServer
  wait_log coordinator "$cs" 'Registered leader CoordinatorAddress' 90 CoordinatorServer || return 2
  log "$TARGET: CoordinatorServer up on 127.0.0.1:$cs after $(( $(date +%s) - t0 )) s"
  write_conf tablet "$ts" "tablet-server.id: 0"
  start_fluss tablet "$TS_HEAP" org.apache.fluss.server.tablet.TabletServer
  wait_log tablet "$ts" 'Registered tablet server 0' 90 TabletServer || return 2
  wait_log coordinator "" 'New tablet server callback for tablet server 0' 30 \
    "the coordinator seeing tablet server 0 (its ZooKeeper child watch)" || return 2
  log "$TARGET: TabletServer 0 up on 127.0.0.1:$ts after $(( $(date +%s) - t0 )) s; running FlussCheck"
  ROWS=$ROWS timeout 600 java -Xmx"$CLIENT_HEAP" "${JVM[@]}" -Djava.io.tmpdir="$WORK/tmp" "${L4JOPT[@]}" \
    -Dlog.file="$WORK/logs/client.log" -cp "$CLIENT_CP" FlussCheck "127.0.0.1:$cs" > "$WORK/logs/check.out" 2> "$WORK/logs/check.err" &
  PIDS+=($!) # waited for in the background, so a signal stops the run at once (the trap)
  set +e; wait "${PIDS[-1]}"; rc=$?; set -e
  unset 'PIDS[-1]'
  sed 's/^/  /' "$WORK/logs/check.out" >&2
  out=$(tail -n 1 "$WORK/logs/check.out")
  if [ $rc -ne 0 ] || [ "$out" != PASS ]; then
    report_failure "FlussCheck exited with $rc: ${out:-no result}"; return 1
  fi
  for p in "${PIDS[@]}"; do alive "$p" || { report_failure "a server died during the check"; return 1; }; done
  DURATION=$(( $(date +%s) - t0 ))
}

SUMMARY=() RC=0
for t in $TARGETS; do
  DURATION=; WHY=; ZK_DESC=$t
  if run "$t"; then r=0; SUMMARY+=("PASS  $t: Fluss $FLUSS_VERSION on $ZK_DESC, check passed in ${DURATION} s")
  else r=$?; SUMMARY+=("FAIL  $t: Fluss $FLUSS_VERSION on $ZK_DESC: $WHY"); [ $RC -ne 0 ] || RC=$r; fi
  if [ -n "${LOGS_OUT:-}" ]; then mkdir -p "$LOGS_OUT/$t" && cp -r "$WORK/logs/." "$LOGS_OUT/$t/" 2>/dev/null || true; fi
  stop_all
done
printf 'fluss.sh: %s\n' "${SUMMARY[@]}"
exit $RC
