#!/usr/bin/env bash
# scripts/peerbench/kafka.sh: Apache Kafka for scripts/bench-peers.sh, KRaft mode, one combined broker+controller, loopback only.
# Resolves org.apache.kafka:kafka_2.13 + kafka-tools (KAFKA_VERSION) with mvn
# dependency:copy-dependencies into $PEERS_DIR/kafka-$KAFKA_VERSION/libs (done once), formats a
# KRaft dir, starts kafka.Kafka, creates one topic, then runs
# org.apache.kafka.tools.ProducerPerformance (N records of SIZE bytes, acks=ACKS) and
# org.apache.kafka.tools.ConsumerPerformance (reads the N back from the earliest offset).
# WORKLOAD=wide produces JSON rows shaped like `strom bench pruning`'s 20-column rows instead
# (5 INT, 5 BIGINT, 10 text-like STRING columns, exactly SIZE=2048 bytes each), zstd-compressed:
# the anchor for column pruning, since a Kafka consumer always reads whole rows.
# Env: WORKLOAD (bytes | wide), N (200000; wide: 50000), SIZE (1024; wide: 2048),
#      PARTITIONS (1; wide: 2), ACKS (all), PRODUCER_PROPS (extra k=v, space-sep., applied last),
#      POOL (wide: distinct rows to draw from, default min(N, 100000)),
#      PORT / CONTROLLER_PORT (default: free loopback ports), KAFKA_VERSION (4.4.0),
#      KAFKA_LIBS (a folder of jars, e.g. an unpacked Kafka's libs/: skips Maven), HEAP (1G),
#      PEERS_DIR (~/.cache/peers). Needs Java 17+ and mvn. Prints one JSON line at the end.
set -Eeuo pipefail

ACKS=${ACKS:-all}; PRODUCER_PROPS=${PRODUCER_PROPS:-}; HEAP=${HEAP:-1G}
KAFKA_VERSION=${KAFKA_VERSION:-4.4.0}; LOG4J_VERSION=${LOG4J_VERSION:-2.25.3}; SLF4J_VERSION=2.0.17
PEERS_DIR=${PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/peers}; KDIR=$PEERS_DIR/kafka-$KAFKA_VERSION; LIBS=${KAFKA_LIBS:-$KDIR/libs}
log() { echo "[kafka.sh] $*" >&2; }
fail() { local m; m=$(printf '%s' "$*" | tr -d '"\\' | tr '\t\r\n' '   '); log "$m"
  printf '{"peer":"kafka","version":"%s","ok":false,"error":"%s"}\n' "$KAFKA_VERSION" "$m"; exit 2; }
trap 'fail "failed at line $LINENO (exit $?); see stderr"' ERR

WORKLOAD=${WORKLOAD:-bytes}
case "$WORKLOAD" in
  bytes) N=${N:-200000}; SIZE=${SIZE:-1024}; PARTITIONS=${PARTITIONS:-1}; WORKLOAD_PROPS=""; POOL="" ;;
  # wide: the shape of `strom bench pruning` (50000 rows of ~2 KB, 2 buckets, ZSTD level 3).
  # batch.size counts *estimated compressed* bytes; the estimate starts at 1.0 and falls 0.005 a
  # batch, so batches grow from 0.5 MiB of rows (242) toward ~2 MiB (Strom loads 2 MiB batches),
  # and a settled 512 KiB stays under the broker's default 1 MiB message.max.bytes.
  wide) N=${N:-50000}; SIZE=${SIZE:-2048}; PARTITIONS=${PARTITIONS:-2}; POOL=${POOL:-$(( N < 100000 ? N : 100000 ))}
        WORKLOAD_PROPS="compression.type=zstd compression.zstd.level=3 batch.size=524288" ;;
  *) fail "WORKLOAD must be bytes or wide, not $WORKLOAD" ;;
esac
[ "$WORKLOAD" != wide ] || [ "$SIZE" -ge 256 ] || fail "WORKLOAD=wide needs SIZE >= 256 (JSON keys and numbers take up to 231 bytes)"
free_port() { local p; for _ in $(seq 100); do p=$((${PORT_MIN:-10000} + RANDOM % (${PORT_MAX:-31999} - ${PORT_MIN:-10000} + 1)))
  (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }; done; return 1; }

# --- install (idempotent) ---------------------------------------------------------------
apt_get() { apt-get install -y -qq "$@" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$@"; } >/dev/null; }
command -v java >/dev/null || apt_get openjdk-17-jre-headless || fail "java not found (Kafka 4.x needs 17+)"
JMAJ=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)
[ "${JMAJ:-0}" -ge 17 ] || fail "Java $JMAJ found; Kafka 4.x brokers need Java 17+ (set JAVA_HOME/PATH)"
if [ -z "${KAFKA_LIBS:-}" ] && [ ! -f "$LIBS/.complete" ]; then
  command -v mvn >/dev/null || apt_get maven || fail "mvn not found and apt-get install maven failed"
  mkdir -p "$KDIR"
  dep() { echo "<dependency><groupId>$1</groupId><artifactId>$2</artifactId><version>$3</version></dependency>"; }
  # kafka_2.13's pom carries no slf4j binding (the tarball adds one), so name log4j2 here.
  cat > "$KDIR/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>local.peers</groupId><artifactId>kafka-peer</artifactId><version>1</version><packaging>pom</packaging>
<dependencies>
$(dep org.apache.kafka kafka_2.13 "$KAFKA_VERSION")
$(dep org.apache.kafka kafka-tools "$KAFKA_VERSION")
$(dep org.slf4j slf4j-api "$SLF4J_VERSION")
$(dep org.apache.logging.log4j log4j-api "$LOG4J_VERSION")
$(dep org.apache.logging.log4j log4j-core "$LOG4J_VERSION")
$(dep org.apache.logging.log4j log4j-slf4j2-impl "$LOG4J_VERSION")
</dependencies></project>
EOF
  log "resolving kafka_2.13:$KAFKA_VERSION + kafka-tools with mvn (log: $KDIR/mvn.log)"
  if ! timeout 900 mvn -B -q -f "$KDIR/pom.xml" -Dmaven.repo.local="$PEERS_DIR/m2" \
      org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
      -DoutputDirectory="$LIBS" -DincludeScope=runtime > "$KDIR/mvn.log" 2>&1; then
    grep -m 3 -E 'ERROR' "$KDIR/mvn.log" >&2 || true
    fail "mvn could not resolve org.apache.kafka:kafka_2.13:$KAFKA_VERSION: no Maven Central (or mirror) reachable from this machine? see $KDIR/mvn.log"
  fi
  touch "$LIBS/.complete"
fi
ls "$LIBS"/kafka_2.13-*.jar "$LIBS"/kafka-tools-*.jar >/dev/null 2>&1 || fail "no Kafka jars in $LIBS"
CP="$LIBS/*"

WORK=$(mktemp -d "$PEERS_DIR/kafka-run.XXXXXX"); mkdir -p "$WORK/logs"
SRV_PID=""
cleanup() {
  if [ -n "$SRV_PID" ] && kill -0 "$SRV_PID" 2>/dev/null; then
    kill "$SRV_PID" 2>/dev/null || true          # controlled shutdown, then force after 30 s
    for _ in $(seq 60); do kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# log4j2: the server logs INFO to a file; tools log WARN to stderr so stdout holds only results
L4J='appender.a.name = A\nappender.a.layout.type = PatternLayout\nappender.a.layout.pattern = [%%d] %%p %%m (%%c)%%n\nrootLogger.appenderRef.a.ref = A\n'
printf "$L4J"'appender.a.type = File\nappender.a.fileName = %s\nrootLogger.level = INFO\n' \
  "$WORK/logs/server.log" > "$WORK/server-log4j2.properties"
printf "$L4J"'appender.a.type = Console\nappender.a.target = SYSTEM_ERR\nrootLogger.level = WARN\n' \
  > "$WORK/tools-log4j2.properties"
# G1 settings of kafka-run-class.sh; an en-US locale keeps the tools' number formats parseable
JVM_GC="-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -Djava.awt.headless=true -Duser.language=en -Duser.country=US"
TOOL_HEAP=512M; [ "$WORKLOAD" = wide ] && TOOL_HEAP=1G # the producer holds the row pool in memory
tool() { timeout 240 java -Xmx"$TOOL_HEAP" $JVM_GC -Dlog4j2.configurationFile="$WORK/tools-log4j2.properties" -cp "$CP" "$@"; }

PORT=${PORT:-$(free_port)}; CONTROLLER_PORT=${CONTROLLER_PORT:-$(free_port)}
[ "$PORT" != "$CONTROLLER_PORT" ] || CONTROLLER_PORT=$(free_port)
BOOT=127.0.0.1:$PORT
cat > "$WORK/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$BOOT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$WORK/data
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF

# StorageTool lives in core as kafka.tools.StorageTool (what bin/kafka-storage.sh runs); the
# second name only guards against a later move to the tools module.
SCLASS=""
for c in kafka.tools.StorageTool org.apache.kafka.tools.StorageTool; do
  if CID=$(tool "$c" random-uuid 2>>"$WORK/logs/tools.err"); then SCLASS=$c; break; fi
done
[ -n "$SCLASS" ] || { cat "$WORK/logs/tools.err" >&2; fail "no StorageTool class on the classpath"; }
tool "$SCLASS" format -t "$CID" -c "$WORK/server.properties" >&2

log "starting Kafka $KAFKA_VERSION (KRaft combined) on $BOOT, controller :$CONTROLLER_PORT"
java -Xmx"$HEAP" -Xms"$HEAP" $JVM_GC -Dlog4j2.configurationFile="$WORK/server-log4j2.properties" \
  -cp "$CP" kafka.Kafka "$WORK/server.properties" > "$WORK/logs/server.out" 2>&1 &
SRV_PID=$!
# the first ERROR/FATAL lines of the broker (a clean shutdown after them fills the log's tail)
srv_errors() { grep -h -m 5 -E '(ERROR|FATAL)|Exception' "$WORK/logs/server.out" "$WORK/logs/server.log" 2>/dev/null | cut -c1-400 >&2 || true; }
ok=""
for _ in $(seq 45); do # topic creation doubles as the readiness probe (each try is a JVM start)
  kill -0 "$SRV_PID" 2>/dev/null || { srv_errors; fail "broker exited during startup: $(srv_errors 2>&1 | head -n 1 | cut -c1-200)"; }
  if tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BOOT" --create --if-not-exists \
      --topic bench --partitions "$PARTITIONS" --replication-factor 1 >/dev/null 2>&1; then ok=1; break; fi
  sleep 1
done
[ -n "$ok" ] || { srv_errors; tail -n 20 "$WORK/logs/server.log" >&2; fail "broker not ready / topic not created in time"; }

tool org.apache.kafka.tools.ProducerPerformance --help > "$WORK/pp.help" 2>&1 || true
PFLAG=--producer-props; grep -q -- '--command-property' "$WORK/pp.help" && PFLAG=--command-property
PAYLOAD=(--record-size "$SIZE")
if [ "$WORKLOAD" = wide ]; then
  log "generating $POOL distinct 20-column JSON rows of $SIZE bytes"
  # Mirrors genRow/genString of main/cli/bench.go: c00..c19 cycle INT (uniform < 10^5), BIGINT
  # (< 10^9), STRING, STRING; strings are words drawn uniformly from the same 50-word vocabulary,
  # joined by spaces and cut to length. The string lengths (~181) are set so that every row is
  # exactly SIZE bytes of JSON. ProducerPerformance sends a row drawn at random from the pool.
  awk -v rows="$POOL" -v size="$SIZE" -v seed=42 'BEGIN {
    nw = split("stream table bucket offset leader replica commit arrow column pruning changelog snapshot segment index watermark writer reader fetch produce schema partition lake tier remote merge engine lookup prefix scan upsert delete insert update coordinator tablet server node cluster metadata session watch epoch fence quorum batch record compress decompress zstd frame", W, " ")
    srand(seed)
    for (r = 0; r < rows; r++) {
      digits = 0
      for (i = 0; i < 20; i += 4) {
        v[i] = int(rand() * 100000); v[i+1] = int(rand() * 1000000000)
        digits += length(v[i] "") + length(v[i+1] "")
      }
      budget = size - 161 - digits; base = int(budget / 10); extra = budget % 10; k = 0
      line = "{"
      for (i = 0; i < 20; i++) {
        line = line (i ? "," : "") sprintf("\"c%02d\":", i)
        if (i % 4 < 2) { line = line v[i]; continue }
        n = base + (k++ < extra); s = W[int(rand() * nw) + 1]
        while (length(s) < n) s = s " " W[int(rand() * nw) + 1]
        line = line "\"" substr(s, 1, n) "\""
      }
      print line "}"
    } }' > "$WORK/rows.json"
  [ "$(awk -v n="$SIZE" 'length($0) != n { bad++ } END { print NR "/" bad + 0 }' "$WORK/rows.json")" = "$POOL/0" ] \
    || fail "generated rows are not all $SIZE bytes"
  PAYLOAD=(--payload-file "$WORK/rows.json")
fi
# shellcheck disable=SC2086 # WORKLOAD_PROPS and PRODUCER_PROPS are lists of k=v words
set -- bootstrap.servers="$BOOT" acks="$ACKS" $WORKLOAD_PROPS $PRODUCER_PROPS
COMP=none; for kv in "$@"; do case "$kv" in compression.type=*) COMP=${kv#*=} ;; esac; done
log "producing $N x ${SIZE}B ($WORKLOAD), acks=$ACKS, partitions=$PARTITIONS, compression=$COMP"
tool org.apache.kafka.tools.ProducerPerformance --topic bench --num-records "$N" "${PAYLOAD[@]}" \
  --throughput -1 "$PFLAG" "$@" | tee "$WORK/produce.out" >&2
# final line: "N records sent, X records/sec (Y MB/sec), A ms avg latency, B ms max latency, p50 ms 50th, ..."
PJSON=$(grep '99th' "$WORK/produce.out" | tail -n 1 | tr -d ',(' | awk '{ for (i = 2; i <= NF; i++) {
    if ($i == "records/sec") r = $(i-1); if ($i == "MB/sec)") m = $(i-1)
    if ($i == "avg") a = $(i-2); if ($i == "max") x = $(i-2)
    if ($i == "50th") p50 = $(i-2); if ($i == "99th") p99 = $(i-2) }
  printf "{\"records\":%s,\"msgs_s\":%s,\"mib_s\":%s,\"avg_ms\":%s,\"p50_ms\":%s,\"p99_ms\":%s,\"max_ms\":%s}", $1, r, m, a, p50, p99, x }')
[ -n "$PJSON" ] || fail "no ProducerPerformance summary line"
# bytes in the topic's log segments (not preallocated), against the N x SIZE payload bytes sent
LOG_BYTES=$(find "$WORK/data" -path '*/bench-*' -name '*.log' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
SJSON=$(awk -v b="$LOG_BYTES" -v p="$((N * SIZE))" 'BEGIN { printf "{\"bytes\":%d,\"payload_bytes\":%d,\"ratio\":%.3f}", b, p, b ? p / b : 0 }')
log "log segments hold $LOG_BYTES bytes for $((N * SIZE)) payload bytes"

tool org.apache.kafka.tools.ConsumerPerformance --help > "$WORK/cp.help" 2>&1 || true
CFLAG=--messages; grep -q -- '--num-records' "$WORK/cp.help" && CFLAG=--num-records
log "consuming $N from the earliest offset"
tool org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$BOOT" --topic bench "$CFLAG" "$N" \
  --group "bench-$$" --timeout 60000 | tee "$WORK/consume.out" >&2
# header "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ..."
CJSON=$(awk -F', *' '/start\.time/ { for (i = 1; i <= NF; i++) h[$i] = i; hdr = 1; next }
  hdr && NF > 5 { printf "{\"records\":%s,\"msgs_s\":%s,\"mib_s\":%s,\"fetch_msgs_s\":%s,\"fetch_mib_s\":%s,\"rebalance_ms\":%s}",
    $h["data.consumed.in.nMsg"], $h["nMsg.sec"], $h["MB.sec"], $h["fetch.nMsg.sec"], $h["fetch.MB.sec"], $h["rebalance.time.ms"]; exit }' "$WORK/consume.out")
[ -n "$CJSON" ] || fail "no ConsumerPerformance summary line"

printf '{"peer":"kafka","version":"%s","mode":"kraft-combined","workload":"%s","n":%s,"size":%s,"pool":%s,"partitions":%s,"acks":"%s","compression":"%s","producer_props":"%s","cores":%s,"date":"%s","produce":%s,"consume":%s,"stored":%s,"ok":true}\n' \
  "$KAFKA_VERSION" "$WORKLOAD" "$N" "$SIZE" "${POOL:-null}" "$PARTITIONS" "$ACKS" "$COMP" "${*:3}" "$(nproc)" "$(date -u +%FT%TZ)" "$PJSON" "$CJSON" "$SJSON"
