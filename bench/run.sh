#!/bin/sh
# Runs the benchmark from this checkout, go run ./bench/cmd/sluice-bench
# with the flags given, with the binaries its serve scenarios start (the
# benchmark itself never runs go): sluice-serve built from this checkout,
# first on the PATH, and envoyproxy/ratelimit's service_cmd installed,
# once, into the user cache directory where sluice-bench looks for it.
# The flags' paths are relative to the repository's root. The committed
# full run (docs/benchmarks.md):
#
#   bench/run.sh --full --redis auto --json bench/runs/full.json --html bench/runs/full.html --docs .
set -eu
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
trap 'exit 130' INT TERM
go build -o "$bin/sluice-serve" ./serve/cmd/sluice-serve
go run ./internal/envoyrl/install >/dev/null
PATH="$bin:$PATH" go run ./bench/cmd/sluice-bench "$@"
