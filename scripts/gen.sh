#!/usr/bin/env bash
# Generates rpc/gen from rpc/proto and fluss/gen from fluss/proto with the tools pinned in go.mod. No network.
set -euo pipefail
cd "$(dirname "$0")/.."
go tool buf lint
go tool buf generate
go tool buf generate --template buf.gen.fluss.yaml
