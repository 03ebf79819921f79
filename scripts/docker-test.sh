#!/usr/bin/env bash
# The container image end to end, on the host's network and loopback addresses only:
#
#   1. a Docker client, a daemon and compose: installs Debian's docker.io (and docker-compose when
#      there is no `docker compose`) if missing, and starts a private dockerd if none answers
#      (no bridge, no iptables: every container here uses --network host), stopping it at the end;
#   2. builds a static strom on the host and the image from Dockerfile.local (no image registry is
#      needed); with STROM_DOCKER_TEST_SOURCE=1 from Dockerfile instead, the multi-stage build from
#      source, its golang base replaced by a stand-in made of the host's Go (some 14 minutes here:
#      it downloads the modules and builds without a cache);
#   3. runs one container: waits for /readyz, creates a table, produces and reads rows with the
#      host's strom, sees the HEALTHCHECK turn healthy and the server run as the image's non-root
#      user, and checks that `docker stop` is a clean shutdown (exit 0);
#   4. `docker compose up` of docker-compose.yml: checks `strom cluster describe` shows 3 alive
#      nodes and that a table with replication factor 3 takes and serves rows;
#   5. removes everything it made (containers, volumes, the image, the daemon it started).
#
# Ports: STROM_DOCKER_TEST_PORTS=P (default 291) puts compose node N on PN3/PN4/PN5 (29113...,
# 29123..., 29133...) and the single container on P43/P44/P45. Its files are under a new
# directory in $TMPDIR (default /tmp).
#
# Exit status: 0 passed, 1 failed, 3 no Docker daemon could be had here (nothing was tested).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

log() { echo "docker-test.sh [${SECONDS}s]: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }
unavailable() { log "SKIPPED: $*"; exit 3; }

P=${STROM_DOCKER_TEST_PORTS:-291}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/strom-docker-test.XXXXXX")
IMAGE=strom:docker-test-$$
GO_IMAGE=strom-docker-test-go:$$
NAME=strom-docker-test-$$
PROJECT=strom-docker-test-$$
COMPOSE=()
DOCKERD_PID=
BIN=$DIR/ctx/strom

cleanup() {
  local rc=$?
  set +e
  if docker info >/dev/null 2>&1; then
    docker rm -f "$NAME" >/dev/null 2>&1
    if [ ${#COMPOSE[@]} -gt 0 ]; then
      "${COMPOSE[@]}" -p "$PROJECT" -f "$ROOT/docker-compose.yml" down -v --timeout 40 >/dev/null 2>&1
    fi
    docker rmi "$IMAGE" "$GO_IMAGE" >/dev/null 2>&1
  fi
  if [ -n "$DOCKERD_PID" ]; then
    if kill -TERM "$DOCKERD_PID" 2>/dev/null; then
      for _ in $(seq 1 300); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$DOCKERD_PID" 2>/dev/null
      log "stopped the dockerd it started"
    fi
    # What it left mounted (the network namespace it keeps under --exec-root).
    awk -v d="$DIR/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do umount "$m"; done
  fi
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT

# apt_install PKG... installs Debian packages, or says why it cannot.
apt_install() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || unavailable "need $* and cannot install them (not root, or no apt-get)"
  log "installing $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >"$DIR/apt.log" 2>&1 ||
    { apt-get update -q >>"$DIR/apt.log" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >>"$DIR/apt.log" 2>&1; } ||
    { tail -5 "$DIR/apt.log" >&2; unavailable "apt-get install $* failed"; }
}

# --- 1. client, daemon, compose
if ! command -v docker >/dev/null; then apt_install docker.io; fi
if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null || apt_install docker.io
  # Its own socket and directories, so that it meets no other daemon's; no bridge network and no
  # iptables rules: the containers here use the host's network.
  log "no Docker daemon answers; starting one (log $DIR/dockerd.log)"
  dockerd -H "unix://$DIR/docker.sock" --data-root "$DIR/docker" --exec-root "$DIR/exec" \
    --pidfile "$DIR/dockerd.pid" --bridge=none --iptables=false --ip6tables=false \
    >"$DIR/dockerd.log" 2>&1 </dev/null &
  DOCKERD_PID=$!
  export DOCKER_HOST=unix://$DIR/docker.sock
  deadline=$((SECONDS + 60))
  until docker info >/dev/null 2>&1; do
    if ! kill -0 "$DOCKERD_PID" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
      tail -20 "$DIR/dockerd.log" >&2
      unavailable "no Docker daemon could be started here (dockerd's log is above)"
    fi
    sleep 0.2
  done
fi
command -v jq >/dev/null || apt_install jq
if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose)
else
  command -v docker-compose >/dev/null || apt_install docker-compose
  COMPOSE=(docker-compose)
fi
log "docker $(docker version -f '{{.Server.Version}}'), ${COMPOSE[*]} $("${COMPOSE[@]}" version --short 2>/dev/null || true)"

# --- 2. the binary and the image
mkdir -p "$DIR/ctx/data"
# Stamped with the commit as Dockerfile's build stage is (its --build-arg below), so that the
# image's `strom version` can be checked.
COMMIT=$(git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS="-X strom/internal/buildinfo.commit=$COMMIT"
CGO_ENABLED=0 go build -trimpath -ldflags "$LDFLAGS" -o "$BIN" .
log "built a static strom"
cp /etc/ssl/certs/ca-certificates.crt "$DIR/ctx/"
# build ARGS... runs the legacy builder: no buildx plugin is needed.
build() {
  DOCKER_BUILDKIT=0 docker build "$@" >>"$DIR/build.log" 2>&1 || { cat "$DIR/build.log" >&2; die "docker build $*"; }
}
if [ "${STROM_DOCKER_TEST_SOURCE:-}" = 1 ]; then
  # Dockerfile, from source. Its build stage wants a golang image, which comes from a registry;
  # a stand-in instead: the host's Go toolchain with Debian's static busybox (for RUN) on scratch.
  dpkg -s busybox-static >/dev/null 2>&1 || apt_install busybox-static
  mkdir -p "$DIR/go"
  cp /bin/busybox /etc/ssl/certs/ca-certificates.crt "$DIR/go/"
  cp -a "$(go env GOROOT)" "$DIR/go/go"
  cat >"$DIR/go/Dockerfile" <<'END'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN mkdir -p /tmp /root && chmod 1777 /tmp
COPY go /usr/local/go
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PATH=/usr/local/go/bin:/bin HOME=/root GOTOOLCHAIN=local
END
  build -t "$GO_IMAGE" "$DIR/go"
  log "built $GO_IMAGE, a stand-in for the golang image"
  # --network host: `go mod download` reaches the Go module proxy.
  build --network host --build-arg GO_IMAGE="$GO_IMAGE" --build-arg STROM_COMMIT="$COMMIT" -t "$IMAGE" .
else
  build -f Dockerfile.local -t "$IMAGE" "$DIR/ctx" # no RUN step
fi
log "built $IMAGE"
got=$(docker run --rm --network host "$IMAGE" version 2>&1) || die "docker run $IMAGE version: $got"
grep -q "$COMMIT" <<<"$got" || die "the image's strom version says $got; want commit $COMMIT"
log "the image's strom version names commit $COMMIT"

# ready API_ADDR WHAT waits until /readyz at API_ADDR answers 200 (strom healthcheck from the
# host); after 90 s it says so and returns 1.
ready() {
  local deadline=$((SECONDS + 90))
  until STROM_API_LISTEN=$1 "$BIN" healthcheck --timeout 2s >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { log "FAIL: $2 is not ready at $1 after 90 s; its log:"; return 1; }
    sleep 0.5
  done
}

# rows DB.TABLE N produces N rows into the table and checks a consume returns all of them.
rows() {
  local i
  for i in $(seq 1 "$2"); do printf '{"id": %d, "v": "row %d"}\n' "$i" "$i"; done |
    strom produce "$1" >/dev/null
  local got
  got=$(strom consume "$1" --from earliest --output json | jq -s 'map(.id) | unique | length')
  [ "$got" = "$2" ] || die "$1: consumed $got distinct rows, produced $2"
}

strom() { "$BIN" --server "$SERVER" "$@"; }

# --- 3. one container
api=127.0.0.1:${P}43
mkdir -p "$DIR/single"
chown 65532:65532 "$DIR/single" 2>/dev/null || chmod 0777 "$DIR/single" # the image's user writes its /data
docker run -d --name "$NAME" --network host -v "$DIR/single:/data" \
  -e STROM_API_LISTEN="$api" -e STROM_RAFT_LISTEN=127.0.0.1:${P}44 -e STROM_GOSSIP_LISTEN=127.0.0.1:${P}45 \
  "$IMAGE" >/dev/null
ready "$api" "the container" || { docker logs "$NAME" 2>&1 | tail -20 >&2; exit 1; }
SERVER=$api
strom db create docker >/dev/null
strom table create docker.events --schema "id BIGINT NOT NULL, v STRING" >/dev/null
rows docker.events 100
log "one container: /readyz answers; 100 rows produced and read back"
deadline=$((SECONDS + 90))
until [ "$(docker inspect -f '{{.State.Health.Status}}' "$NAME")" = healthy ]; do
  [ $SECONDS -lt $deadline ] || die "the HEALTHCHECK is $(docker inspect -f '{{.State.Health.Status}}' "$NAME") after 90 s"
  sleep 0.5
done
pid=$(docker inspect -f '{{.State.Pid}}' "$NAME")
owner=$(stat -c %u:%g "/proc/$pid")
[ "$owner" = 65532:65532 ] || die "the server runs as $owner, want 65532:65532"
[ -n "$(ls -A "$DIR/single")" ] || die "the server wrote nothing into its /data volume"
[ -z "$(find "$DIR/single" ! -user 65532 | head -1)" ] || die "files in /data not owned by 65532: $(find "$DIR/single" ! -user 65532 | head -3)"
log "one container: healthy; the server runs as uid:gid $owner"
docker stop -t 40 "$NAME" >/dev/null
code=$(docker inspect -f '{{.State.ExitCode}}' "$NAME")
[ "$code" = 0 ] || { docker logs "$NAME" 2>&1 | tail -20 >&2; die "docker stop: the server exited $code, want 0 (a clean shutdown)"; }
docker rm "$NAME" >/dev/null
log "one container: docker stop is a clean shutdown"

# --- 4. the three-node compose file
export STROM_IMAGE=$IMAGE STROM_PORTS_1=${P}1 STROM_PORTS_2=${P}2 STROM_PORTS_3=${P}3
STROM_CLUSTER_SECRET=$(head -c 32 /dev/urandom | base64)
export STROM_CLUSTER_SECRET
"${COMPOSE[@]}" -p "$PROJECT" -f docker-compose.yml up -d 2>"$DIR/compose.log" || { cat "$DIR/compose.log" >&2; die "compose up"; }
SERVER=127.0.0.1:${P}13,127.0.0.1:${P}23,127.0.0.1:${P}33
for n in 1 2 3; do
  ready "127.0.0.1:${P}${n}3" "compose node $n" || { "${COMPOSE[@]}" -p "$PROJECT" -f docker-compose.yml logs --tail 20 >&2; exit 1; }
done
deadline=$((SECONDS + 90))
until [ "$(strom cluster describe --output json | jq '[.nodes[] | select(.alive)] | length')" = 3 ]; do
  [ $SECONDS -lt $deadline ] || { strom cluster describe >&2; die "compose: not 3 alive nodes after 90 s"; }
  sleep 0.5
done
strom cluster describe
strom db create docker >/dev/null
strom table create docker.replicated --schema "id BIGINT NOT NULL, v STRING" --buckets 3 \
  --option table.replication.factor=3 >/dev/null
rows docker.replicated 300
log "compose: 3 alive nodes; 300 rows produced into and read from a table of replication factor 3"
"${COMPOSE[@]}" -p "$PROJECT" -f docker-compose.yml down -v --timeout 40 2>>"$DIR/compose.log" || die "compose down"
log "PASS"
