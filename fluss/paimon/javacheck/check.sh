#!/usr/bin/env bash
# Real Paimon 1.3.1 on the lake tables fluss/paimon writes: `go test -run
# TestWriteWarehouse` creates the golden cases' tables in a fresh warehouse,
# then PaimonCheck's `read` mode opens each with Paimon's FileSystemCatalog,
# checks its fields, keys and bucket, writes a row, commits it and reads
# the table back (one row). GOLDEN=1 instead regenerates testdata/*.schema-0
# with Fluss 0.9.1's PaimonLakeCatalog and testdata/keys.jsonl with its
# PaimonKeyEncoder / PaimonBucketingFunction.
#
# Jars: $STROM_CACHE/lake (default ~/.cache/strom/lake; scripts/flink-quickstart.sh
# LAKE=1 installs them, or `install` below): server/ (fluss-server, which holds
# fluss-common), plugins/paimon/ (fluss-lake-paimon, paimon-bundle,
# flink-shaded-hadoop-2-uber). Exit 0 all held, 1 a check failed, 2 setup.
set -Eeuo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd); PKG=$(dirname "$HERE")
LAKE=${STROM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strom}/lake
CP="$LAKE/server/*:$LAKE/plugins/paimon/*"
die() { echo "check.sh: $*" >&2; exit 2; }
ls "$LAKE"/server/fluss-server-*.jar "$LAKE"/plugins/paimon/paimon-bundle-*.jar >/dev/null 2>&1 ||
  die "no lake jars under $LAKE (run LAKE=1 scripts/flink-quickstart.sh once)"
CLASSES=$(mktemp -d); W=$(mktemp -d); trap 'rm -rf "$CLASSES" "$W"' EXIT
javac -nowarn -d "$CLASSES" -cp "$CP" "$HERE/PaimonCheck.java" || die "javac failed"
J=(java -cp "$CLASSES:$CP" PaimonCheck)
if [ "${GOLDEN:-0}" = 1 ]; then
  for f in "$PKG"/testdata/*.desc.json; do n=$(basename "$f" .desc.json)
    "${J[@]}" create "$W" fluss "$n" "$f" 2>/dev/null > "$PKG/testdata/$n.schema-0"; done
  "${J[@]}" keys 2>/dev/null > "$PKG/testdata/keys.jsonl"
  echo "check.sh: regenerated $PKG/testdata"; exit 0
fi
(cd "$PKG" && PAIMON_CHECK_WAREHOUSE=$W go test -count=1 -run '^TestWriteWarehouse$' . >/dev/null) || die "go test -run TestWriteWarehouse failed"
rc=0
for f in "$PKG"/testdata/*.desc.json; do n=$(basename "$f" .desc.json)
  out=$("${J[@]}" read "$W" fluss "$n" 2>"$W/$n.err") || { echo "$n: error: $(grep -m1 -E 'Exception|Error' "$W/$n.err")"; rc=1; continue; }
  if grep -q '^rows 1$' <<<"$out" && grep -q '__timestamp' <<<"$out"; then echo "$n: ok ($(grep '^bucket' <<<"$out"))"
  else echo "$n: error: $out"; rc=1; fi
done
exit $rc
