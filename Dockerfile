# The Strom image, built from source: `docker build -t strom .` (needs the golang image from a
# registry, or another Go image given as --build-arg GO_IMAGE=...; STROM_DOCKER_TEST_SOURCE=1
# scripts/docker-test.sh builds this file with a stand-in). The final stage is the same as
# Dockerfile.local's, which packs a binary built on the host instead (scripts/docker-test.sh, for
# machines without a registry); keep the two alike.
ARG GO_IMAGE=golang:1.26
FROM ${GO_IMAGE} AS build
# What `strom version` prints, stamped as every build stamps it (internal/buildinfo): the context
# has no .git (.dockerignore), so the commit comes in as an argument:
#   docker build --build-arg STROM_COMMIT=$(git rev-parse HEAD) --build-arg STROM_VERSION=v0.2.0 .
ARG STROM_VERSION=0.1.0-dev
ARG STROM_COMMIT=unknown
WORKDIR /src
# The modules first, so that a change of the source alone does not download them again (go.mod
# replaces hashicorp/raft with the copy in third_party/).
COPY go.mod go.sum ./
COPY third_party third_party
RUN go mod download
COPY . .
# A static binary: scratch has no libc. /out/data becomes the volume, owned by the image's user.
RUN CGO_ENABLED=0 go build -trimpath -o /out/strom \
      -ldflags "-s -X strom/internal/buildinfo.version=${STROM_VERSION} -X strom/internal/buildinfo.commit=${STROM_COMMIT}" . && \
    mkdir /out/data

FROM scratch
COPY --from=build /out/strom /strom
# For S3 over https (remote.data.dir s3://...).
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV STROM_DATA_DIR=/data
VOLUME /data
# API (Connect, gRPC, HTTP JSON, /readyz), Raft, gossip (TCP and UDP).
EXPOSE 9123 9124 9125 9125/udp
HEALTHCHECK --interval=5s --timeout=5s --start-period=60s --retries=3 CMD ["/strom", "healthcheck", "--timeout", "4s"]
ENTRYPOINT ["/strom"]
CMD ["server"]
