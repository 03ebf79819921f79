#!/usr/bin/env bash
# The robustness harness (internal/robustness): a cluster of real strom
# processes behind proxies the harness controls, workloads recorded as a
# history, faults from a seed's schedule, the history checked at the end.
#
#   scripts/robustness.sh [--minutes M] [--seed S] [--faults kind,...] [--nodes 3|5] [--dir D]
#   scripts/robustness.sh --ci      # the CI short mode: fixed seeds, every fault kind
#
# --minutes: how long faults are injected (default 5; fractions allowed).
# --seed: the schedule's seed (default: a random one, printed).
# --faults: partition, split, cut, delay, drop, kill, pause, restart,
#   rolling-restart, comma-separated (default: all).
# --dir: where run directories go (default /tmp/strom-robustness); each
#   holds the history, the schedule, the nodes' logs, the verdict. A failed
#   run prints its seed and the command that reproduces its schedule.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=5 seed=0 faults=all nodes=3 dir=/tmp/strom-robustness ci=
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --faults) faults=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --ci) ci=1; shift ;;
    *) echo "usage: $0 [--minutes M] [--seed S] [--faults kind,...] [--nodes 3|5] [--dir D] | --ci" >&2; exit 2 ;;
  esac
done

if [ -n "$ci" ]; then
  # Run directories of passing runs are removed; a failed one is kept and named.
  STROM_ROBUSTNESS=ci exec go test -count=1 -v -run 'TestRobustness$' -timeout 20m ./internal/robustness/
fi
mkdir -p "$dir"
timeout=$(awk -v m="$minutes" 'BEGIN { printf "%dm", m + 15 }')
exec go test -count=1 -v -run 'TestRobustness$' -timeout "$timeout" ./internal/robustness/ -args \
  -robustness.duration="${minutes}m" -robustness.seed="$seed" -robustness.faults="$faults" \
  -robustness.nodes="$nodes" -robustness.dir="$dir"
