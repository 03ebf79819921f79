#!/usr/bin/env bash
# The real-process failover tests of issue #12, in a loop.
#
#   scripts/soak-failover.sh [N]   run them N times (default 20), stopping at the first failure
#
# Each round runs, with the race detector and five leader kills per test (STROM_FAILOVER_KILLS=5;
# CI runs three), internal/e2e's TestReplicatedProduceThroughLeaderSIGKILL (log table, a
# LogScanner polling throughout), TestReplicatedUpsertThroughLeaderSIGKILL (primary-key table,
# lookups after each kill, the fold checked offline on every replica) and
# TestRollingRestartUnderWriteLoad. SOAK_RUN replaces the -run pattern. Each round's `go test -v`
# output (with the servers' logs on a failure) is kept in $SOAK_DIR/round-I.log, SOAK_DIR being
# ./soak-failover/<UTC time> by default. It prints one line per round and the pass count.
set -euo pipefail

cd "$(dirname "$0")/.."
rounds=${1:-20}
case $rounds in '' | *[!0-9]* | 0) echo "soak-failover.sh: N must be a positive count, not '$rounds'" >&2; exit 2 ;; esac
run=${SOAK_RUN:-'^(TestReplicatedProduceThroughLeaderSIGKILL|TestReplicatedUpsertThroughLeaderSIGKILL|TestRollingRestartUnderWriteLoad)$'}
dir=${SOAK_DIR:-./soak-failover/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

go test -race -c -o "$dir/e2e.test" ./internal/e2e
passed=0
for i in $(seq 1 "$rounds"); do
  log=$dir/round-$i.log
  start=$SECONDS
  # The test binary runs in its package's directory, as go test runs it.
  if (cd internal/e2e && STROM_FAILOVER_KILLS=${STROM_FAILOVER_KILLS:-5} "$dir/e2e.test" \
    -test.run "$run" -test.count 1 -test.v -test.timeout 15m) >"$log" 2>&1; then
    passed=$((passed + 1))
    gap=$(grep -o 'longest time between two acknowledged writes [^ ]*' "$log" || true)
    echo "round $i/$rounds: pass in $((SECONDS - start)) s${gap:+ ($gap)}"
  else
    echo "round $i/$rounds: FAIL after $((SECONDS - start)) s; log: $log"
    grep -E -- '^\s*--- FAIL|_test\.go:[0-9]+: ' "$log" | grep -v 'server logs' | tail -20 || true
    echo "soak-failover: $passed of $rounds rounds passed before the first failure; logs in $dir"
    exit 1
  fi
done
echo "soak-failover: $passed of $rounds rounds passed; logs in $dir"
