# scripts/flinkqs/flink.sh, sourced by scripts/flink-quickstart.sh and scripts/flink-sql.sh:
# installs Flink 1.20.3 and the Fluss connector (and with LAKE=1 the lake jars, with SQLCLIENT=1
# Flink's SQL client) into $CACHE once, compiles Quickstart.java when it changes, and sets the
# Java options Flink's JVMs run with. The caller defines log and die and sets ROOT and QS.
FLUSS_VERSION=0.9.1-incubating; FLINK_VERSION=1.20.3; CONNECTOR=fluss-flink-1.20; LOG4J_VERSION=2.25.4
PAIMON_VERSION=1.3.1
CACHE=${STROM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strom}
QDIR=$CACHE/flink/$FLINK_VERSION-$CONNECTOR-$FLUSS_VERSION; QLIBS=$QDIR/libs; CLIBS=$QDIR/sql-client-libs
LDIR=$CACHE/lake
# --- install (idempotent) ---------------------------------------------------------------------
command -v javac >/dev/null || die "java and javac are needed (openjdk-17-jdk-headless)"
dep() { echo "<dependency><groupId>$1</groupId><artifactId>$2</artifactId><version>$3</version></dependency>"; }
POM="<project xmlns=\"http://maven.apache.org/POM/4.0.0\"><modelVersion>4.0.0</modelVersion>
<groupId>local.strom</groupId><artifactId>flink-quickstart</artifactId><version>1</version><packaging>pom</packaging>
<dependencies>
$(dep org.apache.fluss $CONNECTOR $FLUSS_VERSION)
$(dep org.apache.flink flink-table-api-java-bridge $FLINK_VERSION)
$(dep org.apache.flink flink-table-planner-loader $FLINK_VERSION)
$(dep org.apache.flink flink-table-runtime $FLINK_VERSION)
$(dep org.apache.flink flink-clients $FLINK_VERSION)
$(dep org.apache.flink flink-connector-base $FLINK_VERSION)
$(dep org.apache.logging.log4j log4j-api $LOG4J_VERSION)
$(dep org.apache.logging.log4j log4j-core $LOG4J_VERSION)
$(dep org.apache.logging.log4j log4j-slf4j-impl $LOG4J_VERSION)
</dependencies></project>"
if [ ! -f "$QLIBS/.complete" ] || [ "$POM" != "$(cat "$QDIR/pom.xml" 2>/dev/null)" ]; then
  command -v mvn >/dev/null || die "mvn is needed to resolve the Flink jars (Debian: maven)"
  rm -rf "$QLIBS"; mkdir -p "$QDIR"; printf '%s\n' "$POM" > "$QDIR/pom.xml"
  log "resolving Flink $FLINK_VERSION and $CONNECTOR $FLUSS_VERSION with mvn into $QLIBS"
  timeout 900 mvn -B -q -f "$QDIR/pom.xml" -Dmaven.repo.local="$CACHE/flink/m2" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DoutputDirectory="$QLIBS" -DincludeScope=runtime > "$QDIR/mvn.log" 2>&1 ||
    { grep -m 3 ERROR "$QDIR/mvn.log" >&2 || true; die "mvn could not resolve the Flink jars; see $QDIR/mvn.log"; }
  touch "$QLIBS/.complete"
fi
if [ "${LAKE:-0}" = 1 ] && [ ! -f "$LDIR/.complete" ]; then
  log "resolving the lake jars with mvn into $LDIR"
  mkdir -p "$LDIR"; M2=$CACHE/flink/m2
  printf '%s\n' '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>' \
    "<parent><groupId>org.apache.fluss</groupId><artifactId>fluss</artifactId><version>$FLUSS_VERSION</version></parent>" \
    '<artifactId>fluss-lake</artifactId><packaging>pom</packaging></project>' > "$LDIR/fluss-lake-stub.pom"
  timeout 600 mvn -B -q -Dmaven.repo.local="$M2" org.apache.maven.plugins:maven-install-plugin:3.1.2:install-file \
    -Dfile="$LDIR/fluss-lake-stub.pom" -DpomFile="$LDIR/fluss-lake-stub.pom" > "$LDIR/mvn.log" 2>&1 ||
    die "could not install the stub fluss-lake pom; see $LDIR/mvn.log"
  lakejars() { local d=$LDIR/$1 a; shift; mkdir -p "$d"
    for a in "$@"; do timeout 900 mvn -B -q -Dmaven.repo.local="$M2" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
      -Dartifact="$a" -DoutputDirectory="$d" >> "$LDIR/mvn.log" 2>&1 || die "mvn could not fetch $a; see $LDIR/mvn.log"; done; }
  lakejars lake-libs "org.apache.fluss:fluss-lake-paimon:$FLUSS_VERSION" "org.apache.paimon:paimon-flink-1.20:$PAIMON_VERSION" \
    io.trino.hadoop:hadoop-apache:3.3.5-2 "org.apache.flink:flink-connector-files:$FLINK_VERSION"
  lakejars plugins/paimon "org.apache.fluss:fluss-lake-paimon:$FLUSS_VERSION" "org.apache.paimon:paimon-bundle:$PAIMON_VERSION" \
    org.apache.flink:flink-shaded-hadoop-2-uber:2.8.3-10.0
  lakejars server "org.apache.fluss:fluss-server:$FLUSS_VERSION" "org.apache.logging.log4j:log4j-api:$LOG4J_VERSION" \
    "org.apache.logging.log4j:log4j-core:$LOG4J_VERSION" "org.apache.logging.log4j:log4j-1.2-api:$LOG4J_VERSION"
  lakejars opt "org.apache.fluss:fluss-flink-tiering:$FLUSS_VERSION"
  touch "$LDIR/.complete"
fi
# Flink's SQL client as flink-dist ships it, each jar alone: opt/flink-sql-client and
# opt/flink-sql-gateway (sql-client.sh puts both on the classpath), opt/flink-python (whose option
# parser the client loads), lib/flink-json
if [ "${SQLCLIENT:-0}" = 1 ] && [ ! -f "$CLIBS/.complete" ]; then
  command -v mvn >/dev/null || die "mvn is needed to resolve Flink's SQL client (Debian: maven)"
  log "resolving Flink's SQL client $FLINK_VERSION with mvn into $CLIBS"
  mkdir -p "$CLIBS"
  for a in flink-sql-client flink-sql-gateway flink-sql-gateway-api flink-python flink-json; do
    timeout 900 mvn -B -q -Dmaven.repo.local="$CACHE/flink/m2" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
      -Dartifact="org.apache.flink:$a:$FLINK_VERSION" -DoutputDirectory="$CLIBS" >> "$QDIR/mvn-sql-client.log" 2>&1 ||
      die "mvn could not fetch org.apache.flink:$a:$FLINK_VERSION; see $QDIR/mvn-sql-client.log"
  done
  touch "$CLIBS/.complete"
fi
CLASSES=$QDIR/classes-$(sha256sum "$QS/Quickstart.java" | cut -c1-16)
if [ ! -f "$CLASSES/Quickstart.class" ]; then
  log "javac $QS/Quickstart.java"
  rm -rf "$QDIR"/classes-*; mkdir -p "$CLASSES"
  javac -nowarn -d "$CLASSES" -cp "$QLIBS/*" "$QS/Quickstart.java" >&2 || { rm -rf "$CLASSES"; die "javac Quickstart.java failed"; }
fi

# Flink's own JVM options for Java 17 (flink-dist's config.yaml, env.java.opts.all)
FLINK_OPENS=(--add-exports=java.base/sun.net.util=ALL-UNNAMED --add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED
  --add-exports=jdk.compiler/com.sun.tools.javac.api=ALL-UNNAMED --add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
  --add-exports=jdk.compiler/com.sun.tools.javac.parser=ALL-UNNAMED --add-exports=jdk.compiler/com.sun.tools.javac.tree=ALL-UNNAMED
  --add-exports=jdk.compiler/com.sun.tools.javac.util=ALL-UNNAMED --add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED
  --add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.net=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED
  --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens=java.base/java.text=ALL-UNNAMED --add-opens=java.base/java.time=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent=ALL-UNNAMED --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED)

# flink_jvm DIR: sets JVM and L4JOPT, the options of every JVM of a run: its tmp dir and log4j2
# configuration (a file per JVM, -Dlog.file) in DIR
flink_jvm() {
  mkdir -p "$1/tmp"
  JVM=(-XX:+UseG1GC -Djava.awt.headless=true -Djava.io.tmpdir="$1/tmp" --add-opens=java.base/java.nio=ALL-UNNAMED) # Arrow
  cat > "$1/log4j2.properties" <<'L4J'
rootLogger.level = INFO
rootLogger.appenderRef.f.ref = F
appender.f.name = F
appender.f.type = File
appender.f.fileName = ${sys:log.file}
appender.f.layout.type = PatternLayout
appender.f.layout.pattern = %d{HH:mm:ss,SSS} %-5p %c{1} [%t] - %m%n
L4J
  L4JOPT=(-Dlog4j.configurationFile="file:$1/log4j2.properties" -Dlog4j2.shutdownHookEnabled=false)
}
