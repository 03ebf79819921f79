#!/usr/bin/env bash
# Fluss's Flink SQL quickstart ("Real-Time Analytics with Flink", Fluss 0.9.1) against a Strom
# node's Fluss listener, with real Flink and the real Fluss connector, every result checked.
#
#   scripts/flink-quickstart.sh            against a Strom node (`go build`, fluss.listen on a free port)
#   TARGET=fluss scripts/flink-quickstart.sh   the same against real Fluss 0.9.1 (ZooKeeper from
#                                          scripts/zookeeper.sh, a CoordinatorServer, TabletServer 0;
#                                          the jars of scripts/fluss.sh's install): the reference
#   CLIENT=sql-client scripts/flink-quickstart.sh   typed into Flink's own SQL client
#
# Flink 1.20.3 runs as one in-process MiniCluster (1 TaskManager, SLOTS slots) in a JVM that
# also runs scripts/flinkqs/Quickstart.java: the statements of scripts/flinkqs/quickstart.sql in
# order, the sources from scripts/flinkqs/sources.sql (datagen: NATIONS, CUSTOMERS, ORDERS rows).
# CLIENT=table-api (the default) runs them through the Table API with the SQL client's rules;
# CLIENT=sql-client types them one by one into Flink's SQL client (embedded mode, as
# sql-client.sh -i sources.sql starts it, in a JVM of its own; a second one for the waits).
# Checked: the catalog, the four tables, the statement set and the enrichment job (lookup joins FOR SYSTEM_TIME AS OF) until all rows are in (COUNT(*) in batch
# mode), LIMIT 2 giving 2 enriched rows with customer and nation filled, COUNT(*) = ORDERS, the
# point lookup, the UPDATE visible, the DELETE gone. One line per step, "ok" or "error"; exit 0
# when all held, 1 when one did not, 2 when the setup failed (install, a server not starting).
# LAKE=1 runs the lakehouse quickstart ("Building a Streaming Lakehouse", Paimon) instead:
# scripts/flinkqs/lakehouse.sql, the node (or the Fluss servers) with datalake.format paimon and a
# local warehouse, Fluss's real tiering job (fluss-flink-tiering, "flink run" against the
# MiniCluster), then checked: every order tiered (the last lake snapshot's total_record_count),
# SUM(total_price) of t$lake, and the union read's SUM equal to it.
#
# Install (idempotent, into $STROM_CACHE/flink, default ~/.cache/strom/flink): mvn resolves
# Flink 1.20.3's table API, planner loader, runtime and clients (what flink-dist's lib/ gives SQL),
# org.apache.fluss:fluss-flink-1.20:0.9.1-incubating and log4j2 (~190 MB, once); javac compiles
# Quickstart.java when it changes; CLIENT=sql-client adds flink-sql-client, flink-sql-gateway(-api),
# flink-python and flink-json (~35 MB, each jar alone, as flink-dist's opt/ and lib/ have them)
# (scripts/flinkqs/flink.sh does the install). TARGET=fluss needs the Fluss server jars of scripts/fluss.sh
# (run it once; exit 2 without them) and Debian's zookeeper (scripts/zookeeper.sh installs it).
# Needs Java 17 (javac), mvn, go.
#
# Env: TARGET (strom | fluss), NATIONS (25), CUSTOMERS (1000), ORDERS (10000), RATE (datagen rows
#      per second, 10000), SLOTS (10), FLINK_HEAP (1g), AWAIT_S (300: how long the data may take),
#      PORT_MIN/PORT_MAX (the range free ports are picked from, 10000-31999), LOGS_OUT (copy the
#      logs there), STROM_CACHE, LAKE (0 | 1), CLIENT (table-api | sql-client).
# LAKE=1 also installs, each jar alone into $STROM_CACHE/lake (~190 MB, once): lake-libs/ (Flink's
# side: fluss-lake-paimon, paimon-flink-1.20 1.3.1, io.trino.hadoop:hadoop-apache 3.3.5-2,
# flink-connector-files, which $lake reads need), plugins/paimon/ (the Fluss servers': fluss-lake-paimon,
# paimon-bundle 1.3.1, flink-shaded-hadoop-2-uber), server/ (fluss-server and log4j, for
# fluss/paimon/javacheck), opt/ (fluss-flink-tiering); fluss-lake-paimon's parent pom is missing
# from Maven Central, so a stub org.apache.fluss:fluss-lake:0.9.1-incubating goes into the local
# repository first.
set -Eeuo pipefail

TARGET=${TARGET:-strom}
case $TARGET in strom|fluss) ;; *) echo "flink-quickstart.sh: TARGET must be strom or fluss" >&2; exit 2 ;; esac
export NATIONS=${NATIONS:-25} CUSTOMERS=${CUSTOMERS:-1000} ORDERS=${ORDERS:-10000} RATE=${RATE:-10000}
export SLOTS=${SLOTS:-10} AWAIT_S=${AWAIT_S:-300}
LAKE=${LAKE:-0}; CLIENT=${CLIENT:-table-api}
case $CLIENT in table-api) ;; sql-client) export SQLCLIENT=1 ;; *) echo "flink-quickstart.sh: CLIENT must be table-api or sql-client" >&2; exit 2 ;; esac
FLINK_HEAP=${FLINK_HEAP:-$([ "${LAKE:-0}" = 1 ] && echo 1536m || echo 1g)}; PORT_MIN=${PORT_MIN:-10000}; PORT_MAX=${PORT_MAX:-31999}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd); QS=$ROOT/scripts/flinkqs

log() { echo "flink-quickstart.sh: $*" >&2; }
die() { log "$*"; exit 2; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
alive() { kill -0 "$1" 2>/dev/null; }
# free_port: a loopback port nobody listens on that this run has not handed out yet. It runs in
# $(...) subshells, so the ports handed out are kept in a file of the run's dir ($WORK), not in
# a variable, which each subshell lost (two listeners of one node could get the same port).
free_port() {
  local p taken=$WORK/ports-taken; for _ in $(seq 200); do p=$((PORT_MIN + RANDOM % (PORT_MAX - PORT_MIN + 1)))
    grep -qxF "$p" "$taken" 2>/dev/null || listening "$p" || { echo "$p" >> "$taken"; echo "$p"; return 0; }; done
  die "no free loopback port in $PORT_MIN-$PORT_MAX"; }

. "$QS/flink.sh" # the install, and FLINK_OPENS
FLIBS=$CACHE/fluss/$FLUSS_VERSION/libs # scripts/fluss.sh's install


# --- the servers ------------------------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/strom-flinkqs.XXXXXX"); mkdir -p "$WORK/logs" "$WORK/tmp"
PIDS=(); ZK_DIR=; QPID=
cleanup() {
  local i p
  [ -z "$QPID" ] || { kill "$QPID" 2>/dev/null; wait "$QPID" 2>/dev/null; } || true # the quickstart's JVM first
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do # the last started first
    p=${PIDS[$i]}; kill "$p" 2>/dev/null || continue
    for _ in $(seq 60); do alive "$p" || break; sleep 0.5; done
    kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true
  done
  [ -z "$ZK_DIR" ] || STROM_ZK_DIR=$ZK_DIR "$ROOT/scripts/zookeeper.sh" stop 2>/dev/null || true
  if [ -n "${LOGS_OUT:-}" ]; then mkdir -p "$LOGS_OUT" && cp -r "$WORK/logs/." "$LOGS_OUT/" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
tails() { local f; for f in "$WORK"/logs/*; do [ -s "$f" ] && { echo "--- $f (last 20 lines)" >&2; tail -n 20 "$f" | cut -c1-300 >&2; }; done; true; }
setup_failed() { tails; die "$*"; }
flink_jvm "$WORK"
t0=$(date +%s)
LAKE_FLAGS=(); LAKE_PLUGINS=; QCP="$CLASSES:$QLIBS/*"; SQL=$QS/quickstart.sql
if [ "$LAKE" = 1 ]; then
  export WAREHOUSE=$WORK/paimon TIERING_JAR; mkdir -p "$WAREHOUSE"
  TIERING_JAR=$(ls "$LDIR"/opt/fluss-flink-tiering-*.jar 2>/dev/null | head -n 1)
  [ -n "$TIERING_JAR" ] || die "no fluss-flink-tiering jar in $LDIR/opt (remove $LDIR/.complete to resolve again)"
  LAKE_FLAGS=(--datalake-format paimon --datalake-paimon-warehouse "$WAREHOUSE")
  QCP+=":$LDIR/lake-libs/*"; SQL=$QS/lakehouse.sql
  LAKE_PLUGINS=$LDIR/plugins # for the Fluss servers, as bin/config.sh sets FLUSS_PLUGINS_DIR
fi
if [ "$TARGET" = strom ]; then
  log "go build strom"
  (cd "$ROOT" && go build -o "$WORK/strom" .) || setup_failed "go build failed"
  API=$(free_port); RAFT=$(free_port); GOSSIP=$(free_port); FLUSS=$(free_port)
  "$WORK/strom" server --data-dir "$WORK/data" --listen "127.0.0.1:$API" --raft-listen "127.0.0.1:$RAFT" \
    --gossip-listen "127.0.0.1:$GOSSIP" --fluss-listen "127.0.0.1:$FLUSS" "${LAKE_FLAGS[@]}" > "$WORK/logs/strom.log" 2>&1 &
  PIDS+=($!)
  for i in $(seq 600); do
    STROM_API_LISTEN="127.0.0.1:$API" "$WORK/strom" healthcheck --timeout 1s > /dev/null 2>&1 && break
    alive "${PIDS[0]}" && [ "$i" -lt 600 ] || setup_failed "the Strom node did not become ready in 60 s"
    sleep 0.1
  done
  # the Fluss port accepts once the node is ready and the database fluss exists
  for i in $(seq 600); do listening "$FLUSS" && break
    alive "${PIDS[0]}" && [ "$i" -lt 600 ] || setup_failed "the Strom node's Fluss port did not open in 60 s"; sleep 0.1; done
  BOOT=127.0.0.1:$FLUSS; DESC="Strom $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?') (fluss.listen $BOOT)"
else
  jar() { local f; for f in "$FLIBS/$1"-[0-9]*.jar; do [ -f "$f" ] && { echo "$f"; return 0; }; done
    die "no $1 jar in $FLIBS: run scripts/fluss.sh once to install the Fluss servers"; }
  SERVER_CP="$(jar fluss-server):$(jar log4j-api):$(jar log4j-core):$(jar log4j-slf4j-impl):$(jar log4j-1.2-api)"
  for d in "$CACHE/fluss/$FLUSS_VERSION"/patched-*/classes; do # fluss.sh's apache/fluss#2710 fix, when built
    [ -f "$d/../.complete" ] && SERVER_CP="$d:$SERVER_CP"; done
  ZK_DIR=$WORK/zookeeper
  ZK_ADDR=$(STROM_ZK_DIR=$ZK_DIR "$ROOT/scripts/zookeeper.sh" start 2>> "$WORK/logs/zookeeper.out") || setup_failed "scripts/zookeeper.sh start failed"
  CS=$(free_port); TS=$(free_port)
  for s in coordinator tablet; do
    mkdir -p "$WORK/conf/$s"
    { echo "zookeeper.address: $ZK_ADDR"; echo "zookeeper.path.root: /fluss"
      echo "bind.listeners: FLUSS://127.0.0.1:$([ $s = coordinator ] && echo "$CS" || echo "$TS")"
      echo "default.bucket.number: 1"; echo "default.replication.factor: 1"
      echo "data.dir: $WORK/data/$s"; echo "remote.data.dir: $WORK/remote"
      if [ "$LAKE" = 1 ]; then echo "datalake.format: paimon"; echo "datalake.paimon.metastore: filesystem"
        echo "datalake.paimon.warehouse: $WAREHOUSE"; fi
      [ $s = coordinator ] || echo "tablet-server.id: 0"; } > "$WORK/conf/$s/server.yaml"
  done
  start_fluss() { # NAME CLASS PORT PATTERN
    env ${LAKE_PLUGINS:+FLUSS_PLUGINS_DIR=$LAKE_PLUGINS} java -Xmx512m "${JVM[@]}" "${L4JOPT[@]}" -Dlog.file="$WORK/logs/$1.log" -cp "$SERVER_CP" "$2" \
      --configDir "$WORK/conf/$1" > "$WORK/logs/$1.out" 2>&1 &
    PIDS+=($!)
    for i in $(seq 450); do
      listening "$3" && grep -q "$4" "$WORK/logs/$1.log" 2>/dev/null && return 0
      alive "${PIDS[-1]}" && [ "$i" -lt 450 ] || setup_failed "Fluss $1 did not start in 90 s"
      sleep 0.2
    done
  }
  start_fluss coordinator org.apache.fluss.server.coordinator.CoordinatorServer "$CS" 'Registered leader CoordinatorAddress'
  start_fluss tablet org.apache.fluss.server.tablet.TabletServer "$TS" 'Registered tablet server 0'
  for i in $(seq 150); do grep -q 'New tablet server callback for tablet server 0' "$WORK/logs/coordinator.log" && break
    [ "$i" -lt 150 ] || setup_failed "the CoordinatorServer never saw TabletServer 0"; sleep 0.2; done
  BOOT=127.0.0.1:$CS; DESC="Fluss $FLUSS_VERSION (coordinator $BOOT)"
fi
HOW=$([ "$CLIENT" = sql-client ] && echo "typed into Flink's SQL client" || echo "through the Table API")
log "$DESC up after $(( $(date +%s) - t0 )) s; running the quickstart $HOW (Flink $FLINK_VERSION, $CONNECTOR $FLUSS_VERSION)"

# --- the quickstart ---------------------------------------------------------------------------
t1=$(date +%s)
: > "$WORK/logs/quickstart.out" # before the tail below opens it
CLIENT=$CLIENT SQL_CLIENT_CLASSPATH="$QCP:$CLIBS/*" \
  java -Xmx"$FLINK_HEAP" "${JVM[@]}" "${FLINK_OPENS[@]}" "${L4JOPT[@]}" -Dlog.file="$WORK/logs/flink.log" \
  -cp "$QCP" Quickstart "$BOOT" "$QS/sources.sql" "$SQL" \
  > "$WORK/logs/quickstart.out" 2> "$WORK/logs/quickstart.err" &
QPID=$!
tail -n +1 -f --pid="$QPID" "$WORK/logs/quickstart.out" | sed -u 's/^/  /' >&2 &
TAILPID=$!
set +e; wait "$QPID"; rc=$?; wait "$TAILPID"; set -e
QPID=
for p in "${PIDS[@]}"; do alive "$p" || { log "a server process ($p) died during the run"; rc=1; }; done
last=$(tail -n 1 "$WORK/logs/quickstart.out" 2>/dev/null || true)
if [ "$rc" = 0 ] && [ "$last" = PASS ]; then
  log "PASS: the Flink $([ "$LAKE" = 1 ] && echo "lakehouse ")quickstart $HOW on $DESC in $(( $(date +%s) - t1 )) s"
  exit 0
fi
tails
log "FAIL: the Flink quickstart $HOW on $DESC (exit $rc)"
exit 1
