#!/bin/sh
# deploy/build-static.sh OUTDIR: the build steps of the sluice-serve image,
# run both by deploy/Dockerfile and by CI (the deploy module's
# TestBuildStaticScript runs this script and checks what it writes).
#
# Writes into OUTDIR:
#   sluice-serve  the server, statically linked (CGO_ENABLED=0), stripped,
#                 built with -trimpath
#   ratelimit     a relative symbolic link to sluice-serve: the image copies
#                 OUTDIR to /bin/, so that /bin/ratelimit, the command that
#                 Envoy Gateway and envoyproxy/ratelimit's own manifests run,
#                 is sluice-serve
#
# GOOS and GOARCH are taken from the environment (the Dockerfile passes
# buildx's TARGETOS and TARGETARCH); empty means the host's.
set -eu

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
  echo "usage: deploy/build-static.sh OUTDIR" >&2
  exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)

# The repository root, whatever the caller's directory.
cd "$(dirname "$0")/.."

CGO_ENABLED=0
export CGO_ENABLED
go -C serve build -trimpath -ldflags='-s -w' -o "$out/sluice-serve" ./cmd/sluice-serve
rm -f "$out/ratelimit"
ln -s sluice-serve "$out/ratelimit"
