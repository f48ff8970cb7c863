#!/usr/bin/env bash
# Runs a go command on one module of the repository as it would run on the
# module released: outside the workspace (go.work), with this working
# tree's modules served at the release version by a module proxy made of
# them (modproxy). It is how to add a dependency to a module or tidy it,
# which the workspace cannot do for modules that require unreleased
# versions of each other:
#
#   release/gomod.sh serve go get github.com/fsnotify/fsnotify@v1.10.1
#   release/gomod.sh serve go mod tidy
#
# Checksums of the repository's own modules are dropped from go.sum
# afterwards: they are of an unreleased tree, and a release writes them
# (modproxy does, into the modules it serves).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: release/gomod.sh MODULE_DIR go ARGS..." >&2
  exit 2
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$(cd "$1" && pwd)
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
upstream=$(go env GOPROXY)
(cd "$repo/release" && GOWORK=off go run ./modproxy -repo "$repo" -out "$work/proxy" >/dev/null)
(
  cd "$dir"
  GOWORK=off GONOSUMDB=github.com/sluicehq GOPROXY="file://$work/proxy,$upstream" "$@"
)
if [ -f "$dir/go.sum" ]; then
  grep -v '^github.com/sluicehq/' "$dir/go.sum" > "$work/go.sum" || true
  cat "$work/go.sum" > "$dir/go.sum"
fi
