#!/usr/bin/env bash
# Installs headless Chromium (Debian's chromium and chromium-driver) when it
# is missing, for the web console's browser test (ui/console_test.go), and
# prints the path of the browser. Idempotent: does nothing when it is there.
set -euo pipefail

log() { printf 'chromium.sh: %s\n' "$*" >&2; }

if ! command -v chromium >/dev/null 2>&1; then
  log "installing the chromium and chromium-driver packages"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y chromium chromium-driver >&2; then
    $sudo apt-get update >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y chromium chromium-driver >&2
  fi
fi
command -v chromium
