#!/usr/bin/env bash
# The rolling upgrade from the previous release to this tree, on real processes
# (docs/upgrading.md):
#
#   1. builds the previous release: the commit docs/upgrading.md names (the line
#      "Previous release: `<40 hex digits>`"), checked out with `git worktree add` into a
#      temporary directory and built there;
#   2. builds this tree;
#   3. runs internal/e2e's TestRollingUpgrade with the two binaries
#      (STROM_UPGRADE_OLD_BIN, STROM_UPGRADE_NEW_BIN): three old nodes under write load,
#      replaced one at a time by new ones (SIGTERM, same data directory), then every
#      acknowledged row checked and the feature level seen to move only after the last one.
#
# The nodes listen on ephemeral loopback ports. Arguments go to `go test` (e.g. -race).
# Needs the git history (not a shallow clone that lacks the commit).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

log() { echo "upgrade-test.sh [${SECONDS}s]: $*" >&2; }
die() { log "FAIL: $*"; exit 1; }

OLD=$(sed -n 's/^Previous release: `\([0-9a-f]\{40\}\)`.*/\1/p' docs/upgrading.md)
[ -n "$OLD" ] || die "docs/upgrading.md names no previous release (a line 'Previous release: \`<commit>\`')"
if ! git cat-file -e "$OLD^{commit}" 2>/dev/null && [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  log "commit $OLD is not in this shallow clone: fetching the history from origin"
  git fetch -q --unshallow origin >&2 || git fetch -q origin "$OLD" >&2 || true
fi
git cat-file -e "$OLD^{commit}" 2>/dev/null ||
  die "commit $OLD (docs/upgrading.md's previous release) is not in this clone: fetch the full history (git fetch --unshallow)"

DIR=$(mktemp -d "${TMPDIR:-/tmp}/strom-upgrade-test.XXXXXX")
cleanup() {
  local rc=$?
  git -C "$ROOT" worktree remove --force "$DIR/old-src" >/dev/null 2>&1 || true
  rm -rf "$DIR"
  git -C "$ROOT" worktree prune >/dev/null 2>&1 || true
  exit $rc
}
trap cleanup EXIT

# -trimpath for both builds, so the packages the two trees share come from the build cache.
git worktree add --detach "$DIR/old-src" "$OLD" >/dev/null 2>&1 || die "git worktree add $OLD"
(cd "$DIR/old-src" && go build -trimpath -ldflags "-X strom/internal/buildinfo.commit=$OLD" -o "$DIR/strom-old" .) ||
  die "the previous release ($OLD) does not build"
log "built the previous release, $OLD"
NEW=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then NEW=$NEW-dirty; fi
go build -trimpath -ldflags "-X strom/internal/buildinfo.commit=$NEW" -o "$DIR/strom-new" .
log "built this tree, $NEW"

STROM_UPGRADE_OLD_BIN=$DIR/strom-old STROM_UPGRADE_NEW_BIN=$DIR/strom-new \
  go test -count=1 -timeout 10m -v -run '^TestRollingUpgrade$' "$@" ./internal/e2e/ | tee "$DIR/test.log"
# A skip is not a pass: the test must have run.
grep -q -- '^--- PASS: TestRollingUpgrade' "$DIR/test.log" || die "TestRollingUpgrade did not run and pass"
log "passed: $OLD → $NEW"
