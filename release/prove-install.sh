#!/usr/bin/env bash
# Proves, from outside the checkout, that Sluice installs and imports as a
# user gets it from a release: it serves this working tree's modules from a
# module proxy made of them (modproxy), into a fresh module cache, then
#   - go install's sluice, sluice-serve and sluice-bench at the release's
#     version, in an empty directory, and runs them there (sluice serve
#     and sluice bench find the installed commands beside sluice);
#   - go get's grpclimit into a throwaway module that builds and runs.
# Nothing it does uses the checkout's go.work. CI runs it (.ci/run).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# Modules the checkout's go commands already downloaded are served from
# their download cache, the rest from the usual proxy; the repository's
# own come only from the proxy made here (GONOSUMDB: no checksum database
# knows an unreleased tree).
upstream=$(go env GOPROXY)
downloads="$(go env GOMODCACHE)/cache/download"
version=$(cd "$repo/release" && GOWORK=off go run ./modproxy -repo "$repo" -out "$work/proxy")
echo "== the working tree as release $version, from file://$work/proxy"

export GOWORK=off GOFLAGS="-modcacherw -trimpath" GONOSUMDB=github.com/sluicehq
export GOMODCACHE="$work/modcache" GOBIN="$work/bin"
export GOPROXY="file://$work/proxy,file://$downloads,$upstream"
mkdir "$work/elsewhere"
cd "$work/elsewhere"

for cmd in cmd/sluice serve/cmd/sluice-serve bench/cmd/sluice-bench; do
  echo "== go install github.com/sluicehq/sluice/$cmd@$version"
  go install "github.com/sluicehq/sluice/$cmd@$version"
done

echo "== the installed binaries, outside the checkout"
# expect WANT WHAT CMD...: runs CMD, then looks for WANT in all it printed.
# The output is read whole first: `CMD | grep -q` under pipefail fails at
# random when grep exits on the first match and CMD writes on (SIGPIPE).
expect() {
  local want=$1 what=$2 out
  shift 2
  out=$("$@" 2>&1) || true
  if ! grep -q -- "$want" <<<"$out"; then
    echo "$what; it printed:"
    printf '%s\n' "$out"
    exit 1
  fi
}
"$GOBIN/sluice" help >/dev/null
expect '-config' "sluice serve did not run sluice-serve" "$GOBIN/sluice" serve --help
expect '-redis' "sluice bench did not run sluice-bench" "$GOBIN/sluice" bench --help
expect 'shared' "sluice demo printed no result" "$GOBIN/sluice" demo --duration 30s --pods 2

echo "== a throwaway module: go get github.com/sluicehq/sluice/grpclimit@$version"
mkdir "$work/app"
cd "$work/app"
go mod init example.com/app >/dev/null 2>&1
cat > main.go <<'GO'
// A gRPC server limited by grpclimit, as a user's service would be.
package main

import (
	"fmt"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/store/memstore"
)

func main() {
	store, err := memstore.New()
	if err != nil {
		panic(err)
	}
	limiter, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	unary, err := grpclimit.UnaryServerInterceptor(grpclimit.Policy{Name: "per-peer", Limiter: limiter, Limit: sluice.PerMinute(60)})
	if err != nil {
		panic(err)
	}
	server := grpc.NewServer(grpc.ChainUnaryInterceptor(unary))
	defer server.Stop()
	fmt.Println("grpclimit: ok")
}
GO
go get "github.com/sluicehq/sluice/grpclimit@$version"
go mod tidy
go build -o app .
expect 'grpclimit: ok' "the throwaway module's program did not run" ./app
echo "== installed and imported from outside the checkout: ok"
