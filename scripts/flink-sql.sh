#!/usr/bin/env bash
# Flink's own SQL client on this terminal, its jobs on a Flink 1.20.3 MiniCluster, with the Fluss
# connector (fluss-flink-1.20 0.9.1) on its classpath: type Fluss's Flink quickstart into it
# against a Strom node's Fluss listener (README, "Flink SQL on Strom").
#
#   scripts/flink-sql.sh HOST:PORT         HOST:PORT: a node's --fluss-listen (or a Fluss coordinator)
#   LAKE=1 scripts/flink-sql.sh HOST:PORT  with the lake jars too (Paimon, $lake reads)
#
# The client starts as sql-client.sh -i scripts/flinkqs/sources.sql would: the quickstart's source
# tables (datagen) are in default_catalog. It prints the CREATE CATALOG statement for HOST:PORT;
# the statements of scripts/flinkqs/quickstart.sql (without its "-- @" lines) follow in order.
# QUIT; ends the client and the cluster. The install is scripts/flinkqs/flink.sh's (Flink, the
# connector and the SQL client from Maven into ~/.cache/strom/flink once, ~230 MB).
#
# Env: NATIONS (25), CUSTOMERS (1000), ORDERS (10000), RATE (10000): the sources' sizes; SLOTS (10),
#      FLINK_HEAP (1g), STROM_CACHE, LAKE (0 | 1).
set -Eeuo pipefail

[ $# = 1 ] && [[ $1 == *:* ]] || { echo "usage: $0 HOST:PORT   (a Strom node's --fluss-listen address)" >&2; exit 2; }
BOOT=$1
export NATIONS=${NATIONS:-25} CUSTOMERS=${CUSTOMERS:-1000} ORDERS=${ORDERS:-10000} RATE=${RATE:-10000} SLOTS=${SLOTS:-10}
export SQLCLIENT=1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd); QS=$ROOT/scripts/flinkqs
log() { echo "flink-sql.sh: $*" >&2; }
die() { log "$*"; exit 2; }

. "$QS/flink.sh"
(exec 3<>"/dev/tcp/${BOOT%:*}/${BOOT##*:}") 2>/dev/null ||
  die "nothing listens on $BOOT: start a node with --fluss-listen $BOOT (go run . server --fluss-listen $BOOT)"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/strom-flink-sql.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
flink_jvm "$WORK"
CP="$CLASSES:$QLIBS/*"
[ "${LAKE:-0}" = 1 ] && CP+=":$LDIR/lake-libs/*"
log "logs in $WORK (removed on exit)"
SQL_CLIENT_CLASSPATH="$CP:$CLIBS/*" java -Xmx"${FLINK_HEAP:-1g}" "${JVM[@]}" "${FLINK_OPENS[@]}" "${L4JOPT[@]}" \
  -Dlog.file="$WORK/flink.log" -cp "$CP" Quickstart --sql-client "$BOOT" "$QS/sources.sql"
