#!/usr/bin/env bash
# scripts/peerbench/fluss.sh: Apache Fluss for scripts/bench-peers.sh, loopback only.
# Resolves pom.xml (fluss-server + fluss-client FLUSS_VERSION, a log4j2 binding) with
# mvn dependency:copy-dependencies into $PEERS_DIR/fluss-$FLUSS_VERSION/libs (done once), compiles
# FlussBench.java against them with javac (once per source), starts a private ZooKeeper, one
# CoordinatorServer and one TabletServer (data in a scratch dir), waits until the tablet server
# has registered, then runs FlussBench:
#   MODE=bench (default): the workloads of internal/peerbench with the Fluss Java client (see
#       FlussBench.java): the 20-column log table (N rows, BUCKETS buckets, ZSTD level 3)
#       produced and read (20, 1, 5 and 10 columns); the PK table (KV_N upserts, 30% updates,
#       then a lookup of every key, LOOKUP_INFLIGHT outstanding); the 8-column PK table (WIDE_N
#       rows of WIDE_ROW_BYTES in WIDE_BUCKETS buckets, upserted, looked up WIDE_LOOKUP_BATCH keys
#       a request).
#   MODE=check: the same cluster, then a short functional check.
#   TARGET=host:port: no ZooKeeper and no Fluss servers: FlussBench (the same client, the same
#       code) runs against a server already listening there, Strom's fluss.listen for
#       bench-peers.sh's strom-fluss; PEER and PEER_VERSION name it in the JSON (fluss,
#       FLUSS_VERSION), DATA_DIR is its tablet data dir (for the stored bytes; empty: none),
#       SERVER_PIDS its processes (each workload then reports their CPU time beside the client's).
#   Without TARGET each workload reports the CPU time of the servers this script started
#   (ZooKeeper, CoordinatorServer, TabletServer) as server_cpu_s / server_cpu_us (a record).
# Env: MODE, N (200000), KV_N (200000), BUCKETS (2), ROW_BYTES (2048), KV_STR_BYTES (100),
#      UPDATE_RATIO (0.3), LOOKUP_INFLIGHT (1000), WIDE_N (100000), WIDE_BUCKETS (8),
#      WIDE_ROW_BYTES (1024), WIDE_LOOKUP_BATCH (100), CLIENT_PROPS (extra client options,
#      "k=v k=v"), ZK (debian | bundled: the ZooKeeper shaded into fluss-server; default debian),
#      PORT (coordinator port; default: free loopback ports), CS_HEAP (512m), TS_HEAP (2g),
#      CLIENT_HEAP (3g), FLUSS_VERSION (0.9.1-incubating), LOGS_OUT (a dir to copy the server logs
#      into before cleanup), PEERS_DIR (~/.cache/peers).
# Needs Java 11+ and mvn (installed from Debian when missing). Prints one JSON line at the end.
set -Eeuo pipefail

MODE=${MODE:-bench}; N=${N:-200000}; KV_N=${KV_N:-200000}; BUCKETS=${BUCKETS:-2}
ROW_BYTES=${ROW_BYTES:-2048}; KV_STR_BYTES=${KV_STR_BYTES:-100}; UPDATE_RATIO=${UPDATE_RATIO:-0.3}
LOOKUP_INFLIGHT=${LOOKUP_INFLIGHT:-1000}; CLIENT_PROPS=${CLIENT_PROPS:-}; ZK_ROOT=/fluss
ZK=${ZK:-debian}; CS_HEAP=${CS_HEAP:-512m}; TS_HEAP=${TS_HEAP:-2g}; CLIENT_HEAP=${CLIENT_HEAP:-3g}
FLUSS_VERSION=${FLUSS_VERSION:-0.9.1-incubating}
TARGET=${TARGET:-}; PEER=${PEER:-fluss}; PEER_VERSION=${PEER_VERSION:-$FLUSS_VERSION}
PEERS_DIR=${PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/peers}; FDIR=$PEERS_DIR/fluss-$FLUSS_VERSION; LIBS=$FDIR/libs
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd); SRC=$HERE/FlussBench.java
log() { echo "[fluss.sh] $*" >&2; }
jstr() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\t'/ }; printf '%s' "${s//$'\n'/ | }"; }
fail() { log "$*"; printf '{"peer":"%s","version":"%s","mode":"%s","ok":false,"error":"%s"}\n' "$PEER" "$PEER_VERSION" "$MODE" "$(jstr "$*")"; exit 2; }
trap 'fail "failed at line $LINENO (exit $?); see stderr"' ERR
free_port() { local p; for _ in $(seq 100); do p=$((${PORT_MIN:-10000} + RANDOM % (${PORT_MAX:-31999} - ${PORT_MIN:-10000} + 1))) # nobody answers there
  (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }; done; return 1; }
case $MODE in bench|check) ;; *) fail "MODE must be bench or check" ;; esac
mkdir -p "$PEERS_DIR"

# --- install (idempotent) ---------------------------------------------------------------
apt_get() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 ||
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } >/dev/null; }
command -v javac >/dev/null || apt_get openjdk-17-jdk-headless || fail "javac not found"
JMAJ=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | sed -n 1p)
[ "${JMAJ:-0}" -ge 11 ] || fail "Java $JMAJ found; Fluss $FLUSS_VERSION needs Java 11+"
if [ ! -f "$LIBS/.complete" ]; then
  command -v mvn >/dev/null || apt_get maven || fail "mvn not found and apt-get install maven failed"
  mkdir -p "$FDIR"
  # fluss-server and fluss-client are shaded jars; the distribution's lib/ adds the log4j2 binding
  # (fluss-dist/src/main/assemblies/bin.xml: log4j-api, -core, -slf4j-impl, -1.2-api).
  sed "s/@FLUSS_VERSION@/$FLUSS_VERSION/" "$HERE/pom.xml" > "$FDIR/pom.xml"
  log "resolving fluss-server + fluss-client $FLUSS_VERSION with mvn (log: $FDIR/mvn.log)"
  if ! timeout 900 mvn -B -q -f "$FDIR/pom.xml" -Dmaven.repo.local="$PEERS_DIR/m2" \
      org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
      -DoutputDirectory="$LIBS" -DincludeScope=runtime > "$FDIR/mvn.log" 2>&1; then
    grep -m 3 -E 'ERROR' "$FDIR/mvn.log" >&2 || true
    fail "mvn could not resolve org.apache.fluss:fluss-server:$FLUSS_VERSION; see $FDIR/mvn.log"
  fi
  touch "$LIBS/.complete"
fi
jar() { local f; for f in "$LIBS"/"$1"-[0-9]*.jar; do [ -f "$f" ] && { echo "$f"; break; }; done; true; }
for a in fluss-server fluss-client log4j-api log4j-core log4j-slf4j-impl log4j-1.2-api slf4j-api; do
  [ -n "$(jar $a)" ] || fail "no $a jar in $LIBS (remove $LIBS/.complete to resolve again)"; done
L4J="$(jar log4j-api):$(jar log4j-core):$(jar log4j-slf4j-impl)"
SERVER_CP="$(jar fluss-server):$L4J:$(jar log4j-1.2-api)"   # the two shaded jars overlap: one each
# compile FlussBench once per source version
[ -f "$SRC" ] || fail "missing $SRC"
SUM=$(sha256sum "$SRC" | cut -c1-16); CLASSES=$FDIR/bench-classes-$SUM
if [ ! -f "$CLASSES/FlussBench.class" ]; then
  log "javac $SRC"
  rm -rf "$FDIR"/bench-classes-*; mkdir -p "$CLASSES"
  javac -nowarn -d "$CLASSES" -cp "$(jar fluss-client)" "$SRC" >&2 || { rm -rf "$CLASSES"; fail "javac FlussBench.java failed"; }
fi
CLIENT_CP="$CLASSES:$(jar fluss-client):$L4J:$(jar slf4j-api)"
PIDS=() # started servers, in start order; stopped in reverse
if [ -n "$TARGET" ]; then # a server that is already there: no ZooKeeper, no Fluss servers
  BOOT=$TARGET; ZK_DESC=none; TABLET_DATA=${DATA_DIR:-}; WORK=$(mktemp -d "$PEERS_DIR/fluss-run.XXXXXX"); mkdir -p "$WORK/logs" "$WORK/tmp"
  trap 'rm -rf "$WORK"' EXIT
  JVM=(-XX:+UseG1GC -Djava.awt.headless=true -Djava.io.tmpdir="$WORK/tmp" --add-opens=java.base/java.nio=ALL-UNNAMED)
  printf 'rootLogger.level = INFO\nrootLogger.appenderRef.f.ref = F\nappender.f.name = F\nappender.f.type = File\nappender.f.fileName = ${sys:log.file}\nappender.f.layout.type = PatternLayout\nappender.f.layout.pattern = %%d{HH:mm:ss,SSS} %%-5p %%c{1} [%%t] - %%m%%n\n' > "$WORK/log4j2.properties"
  L4JOPT=(-Dlog4j.configurationFile="file:$WORK/log4j2.properties" -Dlog4j2.shutdownHookEnabled=false)
  server_errors() { true; }
  die_server() { fail "$1"; }
  alive() { kill -0 "$1" 2>/dev/null; }
else
  if [ "$ZK" = debian ] && [ ! -x /usr/share/zookeeper/bin/zkServer.sh ]; then
    log "installing Debian's zookeeper package (no service is started: that is zookeeperd)"
    apt_get zookeeper || { log "apt-get install zookeeper failed; using the ZooKeeper bundled in fluss-server"; ZK=bundled; }
  fi

  # --- cluster ----------------------------------------------------------------------------
  WORK=$(mktemp -d "$PEERS_DIR/fluss-run.XXXXXX"); mkdir -p "$WORK/logs" "$WORK/tmp"
  stop_servers() {
    local i p
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
      p=${PIDS[$i]}
      kill "$p" 2>/dev/null || continue # TabletServer first, while the coordinator still answers
      for _ in $(seq 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
      kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true
    done
    PIDS=()
  }
  cleanup() {
    stop_servers
    if [ -n "${LOGS_OUT:-}" ]; then mkdir -p "$LOGS_OUT" && cp -r "$WORK/logs/." "$LOGS_OUT/" 2>/dev/null || true; fi
    rm -rf "$WORK"
  }
  trap cleanup EXIT

  JVM=(-XX:+UseG1GC -Djava.awt.headless=true -Djava.io.tmpdir="$WORK/tmp"
       --add-opens=java.base/java.nio=ALL-UNNAMED) # Arrow (shaded, so unnamed) on Java 17
  # log4j2: every JVM logs INFO to its own file (log.file), nothing to the console
  cat > "$WORK/log4j2.properties" <<'EOF'
rootLogger.level = INFO
rootLogger.appenderRef.f.ref = F
appender.f.name = F
appender.f.type = File
appender.f.fileName = ${sys:log.file}
appender.f.layout.type = PatternLayout
appender.f.layout.pattern = %d{HH:mm:ss,SSS} %-5p %c{1} [%t] - %m%n
logger.netty.name = org.jboss.netty.channel.DefaultChannelPipeline
logger.netty.level = OFF
EOF
  L4JOPT=(-Dlog4j.configurationFile="file:$WORK/log4j2.properties" -Dlog4j2.shutdownHookEnabled=false)

  alive() { kill -0 "$1" 2>/dev/null; }
  listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
  flw() { (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf '%s' "$2" >&3 && timeout 2 cat <&3) 2>/dev/null || true; }
  server_errors() { # per server log: the first ERROR lines
    local f; for f in "$WORK"/logs/coordinator.log "$WORK"/logs/tablet.log; do
      if [ -f "$f" ]; then
        { grep -m 2 -A 1 -E ' ERROR | FATAL ' "$f" || true; } | grep -v -E '^--$' | sed "s|^|$(basename "$f"): |" | cut -c1-300
      fi
    done; }
  die_server() { # WHAT: dump logs, then fail with the first ERROR line in the JSON
    local f first
    for f in "$WORK"/logs/*; do [ -s "$f" ] && { echo "--- $f (tail)" >&2; tail -n 40 "$f" | cut -c1-400 >&2; }; done
    first=$(server_errors | sed -n 1,8p | tr '\n' ' ' | tr -s ' \t' ' ')
    fail "$1${first:+; server logs: $first}"
  }

  CS_PORT=${PORT:-$(free_port)}
  for _ in 1 2 3; do TS_PORT=$(free_port); ZK_PORT=$(free_port)
    [ "$(printf '%s\n' "$CS_PORT" "$TS_PORT" "$ZK_PORT" | sort -u | wc -l)" = 3 ] && break; done
  BOOT=127.0.0.1:$CS_PORT
  ZK_ADDR=127.0.0.1:$ZK_PORT; mkdir -p "$WORK/zk/data"
  cat > "$WORK/zk/zoo.cfg" <<EOF
tickTime=2000
initLimit=10
syncLimit=5
dataDir=$WORK/zk/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
4lw.commands.whitelist=*
admin.enableServer=false
EOF
  if [ "$ZK" = debian ]; then # start-foreground execs java, so $! is the JVM
    ZK_DESC="debian-$(dpkg-query -W -f '${Version}' zookeeper 2>/dev/null || echo '?')"
    ZOO_LOG_DIR="$WORK/logs" ZOOPIDFILE="$WORK/zk/pid" /usr/share/zookeeper/bin/zkServer.sh \
      start-foreground "$WORK/zk/zoo.cfg" > "$WORK/logs/zookeeper.out" 2>&1 &
  else
    ZK_DESC="bundled-3.8.3"
    java -Xmx256m "${JVM[@]}" "${L4JOPT[@]}" -Dlog.file="$WORK/logs/zookeeper.log" -cp "$SERVER_CP" \
      org.apache.fluss.shaded.zookeeper3.org.apache.zookeeper.server.quorum.QuorumPeerMain \
      "$WORK/zk/zoo.cfg" > "$WORK/logs/zookeeper.out" 2>&1 &
  fi
  PIDS+=($!)
  for i in $(seq 150); do
    [ "$(flw "$ZK_PORT" ruok)" = imok ] && break
    alive "${PIDS[0]}" && [ "$i" -lt 150 ] || die_server "ZooKeeper ($ZK_DESC) did not start on :$ZK_PORT"
    sleep 0.2
  done
  log "ZooKeeper ($ZK_DESC) up on $ZK_ADDR"

  # server.yaml per server (keys of fluss-dist's conf/server.yaml; --configDir is all the CLI needs)
  write_conf() { # NAME PORT [EXTRA LINES]
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
    java -Xmx"$2" -Xms"$2" "${JVM[@]}" "${L4JOPT[@]}" -Dlog.file="$WORK/logs/$1.log" -cp "$SERVER_CP" \
      "$3" --configDir "$WORK/conf/$1" > "$WORK/logs/$1.out" 2>&1 &
    PIDS+=($!)
  }
  wait_log() { # NAME PID PORT PATTERN SECONDS WHAT
    local i
    for i in $(seq $(($5 * 5))); do
      listening "$3" && grep -q -E "$4" "$WORK/logs/$1.log" 2>/dev/null && return 0
      alive "$2" || die_server "$6 exited during startup"
      sleep 0.2
    done
    die_server "$6 not ready after $5 s (no '$4' in $1.log)"
  }
  t0=$(date +%s)
  write_conf coordinator "$CS_PORT"
  start_fluss coordinator "$CS_HEAP" org.apache.fluss.server.coordinator.CoordinatorServer
  wait_log coordinator "${PIDS[-1]}" "$CS_PORT" 'Registered leader CoordinatorAddress' 90 "CoordinatorServer"
  log "CoordinatorServer up on $BOOT (zookeeper $ZK_ADDR, root $ZK_ROOT)"
  write_conf tablet "$TS_PORT" "tablet-server.id: 0"
  start_fluss tablet "$TS_HEAP" org.apache.fluss.server.tablet.TabletServer
  wait_log tablet "${PIDS[-1]}" "$TS_PORT" 'Registered tablet server 0' 90 "TabletServer"
  for _ in $(seq 150); do # the coordinator has seen it (a ZooKeeper watch on /tabletservers/ids)
    grep -q 'New tablet server callback for tablet server 0' "$WORK/logs/coordinator.log" && break; sleep 0.2; done
  grep -q 'New tablet server callback for tablet server 0' "$WORK/logs/coordinator.log" ||
    die_server "the coordinator never saw tablet server 0 register (its ZooKeeper child watch did not fire)"
  log "TabletServer 0 up on 127.0.0.1:$TS_PORT; cluster ready in $(( $(date +%s) - t0 ))s"
  TABLET_DATA=$WORK/data/tablet
fi

# --- run FlussBench -----------------------------------------------------------------------
JM=check; [ "$MODE" = bench ] && JM=bench
log "FlussBench $JM against $BOOT${CLIENT_PROPS:+ (CLIENT_PROPS: $CLIENT_PROPS)}"
set +e
OUT=$(N=$N KV_N=$KV_N BUCKETS=$BUCKETS ROW_BYTES=$ROW_BYTES KV_STR_BYTES=$KV_STR_BYTES \
  UPDATE_RATIO=$UPDATE_RATIO LOOKUP_INFLIGHT=$LOOKUP_INFLIGHT CLIENT_PROPS=$CLIENT_PROPS \
  WIDE_N=${WIDE_N:-100000} WIDE_BUCKETS=${WIDE_BUCKETS:-8} WIDE_ROW_BYTES=${WIDE_ROW_BYTES:-1024} WIDE_LOOKUP_BATCH=${WIDE_LOOKUP_BATCH:-100} \
  DATA_DIR="$TABLET_DATA" SERVER_PIDS="${SERVER_PIDS:-${PIDS[*]}}" timeout 600 java -Xmx"$CLIENT_HEAP" "${JVM[@]}" "${L4JOPT[@]}" \
  -Dlog.file="$WORK/logs/client.log" -cp "$CLIENT_CP" FlussBench "$JM" "$BOOT")
rc=$?
set -e
OUT=$(printf '%s\n' "$OUT" | grep '^{' | tail -n 1 || true)
if [ $rc -ne 0 ] || [ -z "$OUT" ]; then
  tail -n 30 "$WORK/logs/client.log" | cut -c1-400 >&2
  die_server "FlussBench $JM exited with $rc"
fi
for p in "${PIDS[@]}"; do alive "$p" || die_server "a Fluss server or ZooKeeper died during the run"; done
BODY=${OUT#\{}; BODY=${BODY%\}}
HEAD=$(printf '"peer":"%s","version":"%s","mode":"%s","zookeeper":"%s","cores":%s,"date":"%s"' \
  "$PEER" "$PEER_VERSION" "$MODE" "$(jstr "$ZK_DESC")" "$(nproc)" "$(date -u +%FT%TZ)")
if [ "$JM" = check ] && ! printf '%s' "$OUT" | grep -q '"check_ok":true'; then
  server_errors >&2
  ERRS=$(server_errors | sed -n 1,8p | tr '\n' ' ' | tr -s ' \t' ' ')
  printf '{%s,%s,"server_errors":"%s","ok":false,"error":"functional check failed"}\n' "$HEAD" "$BODY" "$(jstr "$ERRS")"
  exit 3
fi
printf '{%s,%s,"ok":true}\n' "$HEAD" "$BODY"
