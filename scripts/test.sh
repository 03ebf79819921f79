#!/usr/bin/env bash
# The project's test command: formatting, vet, staticcheck, generated code
# up to date, buf lint, then every test with the race detector, short fuzzing,
# the Curator differential suite, real Fluss servers on the ZooKeeper shim, and
# Fluss's Flink SQL quickstart against a node's Fluss listener.
# Go tools are pinned in go.mod and run with `go tool`; ZooKeeper and Chromium (Debian's
# packages), versitygw (an S3-compatible server, from its Go module), the
# Curator jars, Fluss's jars and Flink's (Maven) are installed by the scripts it
# calls; the Curator, Fluss and Flink steps need a JDK and mvn. With STROM_DOCKER_TEST=1 it
# also tests the container image (scripts/docker-test.sh, which needs a Docker daemon or
# the privileges to start one).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's header carries the minutes and seconds since the start, so a
# slow step shows in CI's log (the whole must stay under 30 minutes on 2 cores).
start=$SECONDS
step() { printf '\n== [%dm%02ds] %s\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$*"; }

step "gofmt"
unformatted=$(find . -name '*.go' -not -path './rpc/gen/*' -not -path './fluss/gen/*' -not -path './.git/*' -print0 | xargs -0 gofmt -l)
if [ -n "$unformatted" ]; then
  echo "gofmt would change these files (run gofmt -w):"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "staticcheck"
go tool staticcheck ./...

step "buf lint and generated code"
go tool buf lint
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
go tool buf generate -o "$tmp"
go tool buf generate --template buf.gen.fluss.yaml -o "$tmp"
for d in rpc/gen fluss/gen; do
  if ! diff -r "$tmp/$d" "$d"; then
    echo "$d is stale: run scripts/gen.sh and commit the result"; exit 1
  fi
done

step "a private ZooKeeper for the shim's differential tests"
# Installs Debian's zookeeper package when missing; the tests compare the
# shim with it operation by operation.
export STROM_ZK_ADDR
STROM_ZK_ADDR=$(scripts/zookeeper.sh start)
trap 'rm -rf "$tmp"; scripts/zookeeper.sh stop >/dev/null 2>&1 || true' EXIT
echo "ZooKeeper at $STROM_ZK_ADDR"

step "a private S3-compatible server (versitygw) for remote/'s conformance suite"
# Installs versitygw with go install into a cache once (about 90 s); the S3
# tests of remote/ run against it (STROM_S3_*), and fail without it under CI=true.
trap 'rm -rf "$tmp"; scripts/zookeeper.sh stop >/dev/null 2>&1 || true; scripts/versitygw.sh stop >/dev/null 2>&1 || true' EXIT
vgw_env=$(scripts/versitygw.sh start) # a failure stops here (set -e), as eval "$(...)" would not
eval "$vgw_env"
echo "versitygw at $STROM_S3_ENDPOINT"

step "headless Chromium for the web console's browser test (ui/console_test.go)"
# Installs Debian's chromium and chromium-driver when missing; under CI=true
# the test fails without a browser rather than skipping.
echo "Chromium at $(scripts/chromium.sh)"

step "go test -race"
# -count=1: the e2e tests build the binary in a subprocess, which the test cache cannot see.
go test -race -count=1 -timeout 20m "$@" ./...
# third_party/raft is its own module (go.mod's replace), outside ./...: its strom tests.
(cd third_party/raft && go test -race -count=1 -timeout 5m .)

step "the rolling upgrade: the previous release (docs/upgrading.md) replaced node by node under load"
# Builds the commit docs/upgrading.md names in a git worktree, and this tree (3.5 minutes on the
# loaded 2-core box, mostly the two builds; the test itself took 16 s).
scripts/upgrade-test.sh

step "the robustness harness, short: real processes under every fault kind, histories checked"
# Seeds 1 and 2, 110 s of faults each (docs/robustness.md); scripts/robustness.sh runs long ones.
scripts/robustness.sh --ci

step "fuzzing, short: the produce/fetch property, the Arrow decoders, the Fluss frame decoders and log batch conversion"
# scripts/fuzz.sh runs them longer (10 minutes for the property by default).
scripts/fuzz.sh -d 12s record:FuzzArrowServable
scripts/fuzz.sh -d 4s record/arrowmsg:FuzzParse record/arrowmsg:FuzzProject record/arrowmsg:FuzzDecode fluss/wire:FuzzDecode fluss/logbatch:FuzzConvert

step "allocation tests (without -race, which changes allocation)"
# Files built with !race: they measure what the produce path allocates, that
# counting produce and fetch for /metrics allocates nothing, that a fetch
# does not copy its log read, and that the leader's replica fetch reads into
# pooled buffers; and, on the Fluss listener's path, that converting batch after
# batch onto one answer grows it amortised, that finding a request's message
# types allocates only the messages, and that a FETCH_LOG copies neither its
# reads nor its answer (TestFlussFetchDoesNotCopy, matched by DoesNotCopy).
go test -count=1 -run 'DoesNotCopy|AllocatesNothing|LendsReadBuffers' "$@" ./server/ ./client/
go test -count=1 -run 'GrowsAmortised|AllocatesOnlyTheMessages' "$@" ./fluss/logbatch/ ./fluss/protocol/

step "the Curator differential suite: the Java client and Curator's recipes, shim vs ZooKeeper"
# Installs the zookeeper and curator-recipes jars with Maven into a cache once.
scripts/zkdiff.sh

step "the reference deployment: real Apache Fluss servers on Strom's ZooKeeper shim"
# Installs Fluss's jars with Maven into a cache once; runs Fluss's own client
# against Fluss on the real ZooKeeper above (the reference), then on the shim.
scripts/fluss.sh both
step "the reference deployment on a three-node Strom cluster: the Fluss servers on different nodes"
scripts/fluss.sh cluster
step "the Fluss protocol: the real Fluss 0.9.1 Java client (Admin API, log path, primary-key path) against a node's fluss.listen"
# The jars are the ones fluss.sh cached above; the binary is built once here
# (check.sh builds its own without STROM_BIN); a JVM per check.
# FlussLogCheck passed 20 runs in 20 on 2026-12-02 after the empty-bucket fix
# (fluss/DESIGN.md, "The log path").
go build -o "$tmp/strom" .
STROM_BIN="$tmp/strom" fluss/javacheck/check.sh
step "Flink SQL on Strom: Fluss's Flink quickstart typed into Flink's SQL client against a node's fluss.listen, every result checked"
# Installs Flink 1.20.3, its SQL client and fluss-flink-1.20 0.9.1 with Maven into a cache once
# (~230 MB); then a node, a Flink MiniCluster and the quickstart's statements in order, typed into
# the SQL client as a user would (README, "Flink SQL on Strom"); 148 s of statements at load 16.
CLIENT=sql-client scripts/flink-quickstart.sh
step "the lakehouse: Fluss's Paimon lakehouse quickstart (real tiering job, \$lake and union reads) on a node, and real Paimon on fluss/paimon's tables"
# LAKE=1 installs the lake jars once (~190 MB, each alone, into ~/.cache/strom/lake); a run took
# 2.5 minutes on the shared box at load 10 (113 s of statements), the install 2 more from a warm
# Maven repository (README, "Flink SQL on Strom"). check.sh reuses those jars (about 15 s).
LAKE=1 scripts/flink-quickstart.sh
fluss/paimon/javacheck/check.sh
step "what a Fluss deployment lives through: restarts of its ZooKeeper, a killed tablet server, coordinator failover"
# The same two targets: the real ZooKeeper (restarted, so a private one) tells a Fluss problem apart.
# Its FlussCheck hangs (about 1 run in 14 on the shim) were a Fluss 0.9.1 race that any ZooKeeper
# can hit; fluss.sh runs Fluss with the upstream fix (apache/fluss#2710). Strom's run must pass at
# once. The reference gets one more try: on a loaded machine the real ZooKeeper, restarted with
# SIGKILL, can take longer than the 6 s session timeout to serve again and expire a session (1 run
# in 6 on the shared box, 2026-12-01). A failed run leaves thread dumps in its logs.
scripts/fluss.sh survive strom
if ! scripts/fluss.sh survive zookeeper; then
  echo "WARNING: scripts/fluss.sh survive zookeeper failed once (see above); trying it once more"
  scripts/fluss.sh survive zookeeper
fi

if [ "${STROM_DOCKER_TEST:-}" = 1 ]; then
  step "the container image: one container and the three-node docker-compose.yml, host network"
  # Installs docker.io and starts a private dockerd when missing; exit 3 says no daemon could be
  # had here (CI may lack the privileges), which skips only this step.
  rc=0
  scripts/docker-test.sh || rc=$?
  if [ "$rc" = 3 ]; then
    echo "SKIPPED: scripts/docker-test.sh found no Docker daemon it could use (see above)"
  elif [ "$rc" != 0 ]; then
    exit "$rc"
  fi
fi

step "done"
