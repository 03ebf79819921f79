#!/usr/bin/env bash
# The real Fluss 0.9.1 Java client against a Strom node's fluss.listen:
# FlussClientCheck.java (the Admin API: Flink's catalog probes, create, list,
# exists, table info and schema, drop, and the errors of each), then
# FlussLogCheck.java (the log path: append 1000 rows, scan them all and
# projected, list offsets, scan a table with an empty bucket), then
# FlussKvCheck.java (the primary-key path: upsert, partial update, delete,
# lookup, prefix lookup, limit scan). FLUSS_CHECKS picks the classes
# (default: all three, in that order; CI runs the default).
# Uses the Fluss jars scripts/fluss.sh resolves into its cache (run it once);
# exit 2 when they are not there. scripts/test.sh runs it after fluss.sh.
# STROM_BIN: the strom binary to run (default: go build one into a temp dir).
#   fluss/javacheck/check.sh [base-port]   (4 ports from base-port; default: free ones)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PORT=${1:-}
if [ -z "$PORT" ]; then # 4 consecutive free ports below Linux's ephemeral range
  for _ in $(seq 100); do
    PORT=$((10000 + RANDOM % 22000)); free=1
    for p in $PORT $((PORT + 1)) $((PORT + 2)) $((PORT + 3)); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then free=0; fi
    done
    [ $free = 1 ] && break
  done
fi
LIBS=${STROM_FLUSS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strom/fluss}/0.9.1-incubating/libs
[ -f "$LIBS/fluss-client-0.9.1-incubating.jar" ] || { echo "check.sh: no Fluss jars in $LIBS: run scripts/fluss.sh strom once" >&2; exit 2; }
CP=$(ls "$LIBS"/*.jar | tr '\n' ':')
WORK=$(mktemp -d /tmp/fluss-javacheck-XXXXXX)
pid=
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
BIN=${STROM_BIN:-}
if [ -z "$BIN" ]; then BIN="$WORK/strom"; (cd "$ROOT" && go build -o "$BIN" .); fi
[ -x "$BIN" ] || { echo "check.sh: STROM_BIN=$BIN is not an executable" >&2; exit 1; }
javac -d "$WORK" -cp "$CP" "$ROOT"/fluss/javacheck/*.java
"$BIN" server --data-dir "$WORK/data" --listen "127.0.0.1:$PORT" --raft-listen "127.0.0.1:$((PORT + 1))" \
  --gossip-listen "127.0.0.1:$((PORT + 2))" --fluss-listen "127.0.0.1:$((PORT + 3))" > "$WORK/node.log" 2>&1 &
pid=$!
# Wait only until the Fluss port is bound, not until the node is ready: the
# node accepts on it once it is ready and the database fluss exists
# (listener.Config.Open), so the client connects while the node starts and
# its first request waits for the answer (the Fluss client retries neither
# NODE_NOT_READY nor, beyond 0.7 s, a refused connection at bootstrap).
bound=0
for _ in $(seq 600); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$((PORT + 3))") 2>/dev/null; then bound=1; break; fi
  kill -0 "$pid" 2>/dev/null || { cat "$WORK/node.log" >&2; exit 1; }
  sleep 0.1
done
[ $bound = 1 ] || { echo "check.sh: the node did not bind fluss.listen in 60 s; its log:" >&2; tail -n 40 "$WORK/node.log" >&2; exit 1; }
# FlussKvCheck passed 10 runs of 10 on 2026-12-02, FlussLogCheck 20 of 20
# after the empty-bucket fix (fluss/DESIGN.md).
# Arrow (the log path's) needs java.nio opened, as for any Fluss client.
for check in ${FLUSS_CHECKS:-FlussClientCheck FlussLogCheck FlussKvCheck}; do
  rc=0
  out=$(timeout 300 java -Xmx256m --add-opens=java.base/java.nio=ALL-UNNAMED -cp "$CP:$WORK" "$check" "127.0.0.1:$((PORT + 3))" 2>"$WORK/client.err") || rc=$?
  echo "$out"
  if [ $rc = 0 ] && [ "$(tail -n 1 <<<"$out")" = PASS ]; then
    echo "check.sh: ok: the Fluss 0.9.1 client ($check) against Strom"
  else
    echo "check.sh: FAILED: $check (exit $rc); the client's stderr and the node's log:" >&2
    tail -n 40 "$WORK/client.err" >&2; tail -n 40 "$WORK/node.log" >&2; exit 1
  fi
done
