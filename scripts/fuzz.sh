#!/usr/bin/env bash
# Runs fuzz targets, one after the other, and fails on the first failure (go
# test writes the failing input under the package's testdata/fuzz/<target>/,
# where it stays as a seed once fixed).
#
#   scripts/fuzz.sh                      # the produce/fetch property, 10 minutes
#   scripts/fuzz.sh -d 30s               # the same, 30 seconds
#   scripts/fuzz.sh -d 2m all            # every target below, 2 minutes each
#   scripts/fuzz.sh -d 1m record/arrowmsg:FuzzDecode record:FuzzDecodeArrowBatch
#
# A target is PACKAGE:NAME with PACKAGE relative to the module. The default is
# record:FuzzArrowServable: any batch ProduceLog's validation accepts is
# served by full, projected and JSON fetches. "all" adds the Arrow decoders'
# targets, the Fluss frame decoders' and log batch conversion's. Run it under
# nice on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=10m
while getopts "d:h" opt; do
  case $opt in
    d) duration=$OPTARG ;;
    *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))

all=(record:FuzzArrowServable record:FuzzDecodeArrowBatch
  record/arrowmsg:FuzzParse record/arrowmsg:FuzzProject record/arrowmsg:FuzzDecode
  fluss/wire:FuzzDecode fluss/logbatch:FuzzConvert)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(record:FuzzArrowServable)
elif [ "${targets[*]}" = all ]; then
  targets=("${all[@]}")
fi

for t in "${targets[@]}"; do
  pkg=${t%%:*} name=${t#*:}
  if [ "$pkg" = "$t" ] || [ -z "$name" ]; then
    echo "fuzz.sh: target $t: want PACKAGE:NAME, e.g. record:FuzzArrowServable" >&2; exit 2
  fi
  echo "== fuzz $pkg $name for $duration"
  # Go's fuzzing engine can report the end of -fuzztime itself as a failure
  # ("context deadline exceeded", no failing input written): that one run is
  # tried again, once; any other failure, or a second one, fails.
  for try in 1 2; do
    out=$(mktemp)
    rc=0
    go test -run '^$' -fuzz "^$name\$" -fuzztime "$duration" "./$pkg/" 2>&1 | tee "$out" || rc=$?
    if [ $rc != 0 ] && [ $try = 1 ] && grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out"; then
      echo "fuzz.sh: $pkg $name: the fuzzing engine timed out at the end of -fuzztime with no failing input; again, once" >&2
      rm -f "$out"; continue
    fi
    rm -f "$out"
    [ $rc = 0 ] || exit $rc
    break
  done
done
