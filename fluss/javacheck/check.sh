#!/usr/bin/env bash
# The real Fluss 0.9.1 Java client against a Strom node's fluss.listen: it must
# accept Strom's API_VERSIONS reply and report Strom's error for the next key it
# sends (GET_METADATA), proving the framing and the error body on the wire.
# Uses the Fluss jars scripts/fluss.sh resolves into its cache (run it once).
# Not in CI yet; run by hand: fluss/javacheck/check.sh [base-port, default 29500].
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PORT=${1:-29500}
LIBS=${STROM_FLUSS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strom/fluss}/0.9.1-incubating/libs
[ -f "$LIBS/fluss-client-0.9.1-incubating.jar" ] || { echo "check.sh: no Fluss jars in $LIBS: run scripts/fluss.sh strom once" >&2; exit 2; }
CP=$(ls "$LIBS"/*.jar | tr '\n' ':')
WORK=$(mktemp -d /tmp/fluss-javacheck-XXXXXX)
pid=
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
(cd "$ROOT" && go build -o "$WORK/strom" .)
javac -d "$WORK" -cp "$CP" "$ROOT/fluss/javacheck/FlussClientCheck.java"
"$WORK/strom" server --data-dir "$WORK/data" --listen "127.0.0.1:$PORT" --raft-listen "127.0.0.1:$((PORT + 1))" \
  --gossip-listen "127.0.0.1:$((PORT + 2))" --fluss-listen "127.0.0.1:$((PORT + 3))" > "$WORK/node.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  grep -q 'serving the Fluss protocol' "$WORK/node.log" && break
  kill -0 "$pid" 2>/dev/null || { cat "$WORK/node.log" >&2; exit 1; }
  sleep 0.1
done
out=$(timeout 120 java -Xmx256m -cp "$CP:$WORK" FlussClientCheck "127.0.0.1:$((PORT + 3))" 2>/dev/null)
echo "$out"
if grep -q 'caught: org.apache.fluss.exception.UnsupportedVersionException: Strom does not serve GET_METADATA(1012) yet' <<<"$out"; then
  echo "check.sh: ok: the Fluss client took Strom's API_VERSIONS and reported its error for GET_METADATA"
else
  echo "check.sh: FAILED: the Fluss client did not get as far as Strom's GET_METADATA error" >&2; exit 1
fi
