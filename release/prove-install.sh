#!/usr/bin/env bash
# Proves, from outside the checkout, that Sluice installs and imports as a
# user gets it from a release: it serves this working tree's modules from a
# module proxy made of them (modproxy), into a fresh module cache, then
#   - go install's sluice, sluice-serve and sluice-bench at the release's
#     version, in an empty directory, and runs them there (sluice serve
#     and sluice bench find the installed commands beside sluice);
#   - sends SIGHUP, SIGTERM and SIGINT to the installed sluice serve's
#     sluice process alone, and wants sluice-serve to reload on the first
#     and to drain and stop on the others, sluice exiting 0;
#   - go get's grpclimit into a throwaway module that builds and runs, at
#     the version and with no version (@latest).
# Nothing it does uses the checkout's go.work. CI runs it (.ci/run).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
# The sluice serve started below, and the sluice-serve it runs (in a
# process group of its own, which a kill of sluice does not reach): killed
# by pid whatever fails.
serve_pid="" serve_children=""
stop_serve() {
  if [ -n "$serve_pid" ]; then
    serve_children="$serve_children $(pgrep -P "$serve_pid" 2>/dev/null || true)"
    kill -KILL "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  for pid in $serve_children; do
    kill -KILL "$pid" 2>/dev/null || true
  done
  serve_pid="" serve_children=""
}
trap 'stop_serve; chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

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

echo "== the installed sluice serve: SIGHUP reloads, SIGTERM and SIGINT drain and stop"
# On the embedded store (no Redis), with a native policy file and no watch
# of it (--watch 0), so that a reload is the signal's. Each signal goes to
# the sluice process alone; sluice passes it on to sluice-serve.
policies="$work/elsewhere/policies.yaml"
serve_log="$work/elsewhere/serve.log"
fail_serve() {
  echo "$1; the log of sluice serve:"
  cat "$serve_log"
  exit 1
}
# await WANT WHAT: waits up to 60 s for a line of the log containing WANT;
# fails, saying WHAT, if none comes or sluice exits first.
await() {
  local i
  for i in $(seq 600); do
    grep -q -- "$1" "$serve_log" && return 0
    if ! kill -0 "$serve_pid" 2>/dev/null; then
      grep -q -- "$1" "$serve_log" && return 0 # written as it exited
      fail_serve "$2: sluice exited first"
    fi
    sleep 0.1
  done
  fail_serve "$2 within 60 s"
}
# start_serve: starts sluice serve and waits for its listening line; sets
# serve_pid, serve_children (its sluice-serve) and http (its HTTP address).
start_serve() {
  : >"$serve_log"
  "$GOBIN/sluice" serve --config "$policies" --grpc 127.0.0.1:0 --http 127.0.0.1:0 --watch 0 >"$serve_log" 2>&1 &
  serve_pid=$!
  await 'msg="sluice serve: listening"' "sluice serve did not listen"
  serve_children=$(pgrep -P "$serve_pid" || true)
  [ -n "$serve_children" ] || fail_serve "sluice runs no sluice-serve"
  http=$(sed -n 's/.*msg="sluice serve: listening" grpc=[^ ]* http=\([^ ]*\).*/\1/p' "$serve_log")
  [ -n "$http" ] || fail_serve "no HTTP address in the listening line"
}
# allow POLICY: POST /v1/allow {"policy": POLICY, "key": "k"} to sluice
# serve, over bash's /dev/tcp (no HTTP client needed); prints the response.
allow() {
  local body="{\"policy\": \"$1\", \"key\": \"k\"}"
  timeout 10 bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1##*:}" &&
    printf "POST /v1/allow HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" "$1" "${#2}" "$2" >&3 &&
    cat <&3' _ "$http" "$body" || true
}
# stop_with SIGNAL NAME: sends SIGNAL to sluice alone and wants sluice-serve
# to drain (its line naming the signal as Go does, NAME) and stop, and
# sluice to exit 0, within 60 s.
stop_with() {
  local sig=$1 name=$2 status=0 i pid
  kill -s "$sig" "$serve_pid"
  await "shutting down: draining the calls in flight\" signal=$name" "no drain on SIG$sig"
  await 'msg="sluice serve: stopped"' "sluice-serve did not stop on SIG$sig"
  for i in $(seq 600); do
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$serve_pid" 2>/dev/null && fail_serve "sluice did not exit within 60 s of SIG$sig"
  wait "$serve_pid" || status=$?
  serve_pid=""
  [ "$status" -eq 0 ] || fail_serve "sluice exited $status on SIG$sig, not 0"
  for pid in $serve_children; do
    kill -0 "$pid" 2>/dev/null && fail_serve "sluice-serve (pid $pid) still runs after sluice exited"
  done
  serve_children=""
}
printf 'domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 5, period: 1h}\n' >"$policies"
start_serve
answer=$(allow added)
[[ $answer == "HTTP/1."[01]" 400"* ]] || fail_serve "POST /v1/allow of a policy not in the file: want 400, got: $answer"
printf '  - {name: added, match: [{key: tenant}], rate: 5, period: 1h}\n' >>"$policies"
kill -s HUP "$serve_pid"
await 'msg="sluice serve: reloaded"' "no reload on SIGHUP"
kill -0 "$serve_pid" 2>/dev/null || fail_serve "sluice exited on SIGHUP"
answer=$(allow added)
[[ $answer == "HTTP/1."[01]" 200"*'"allowed":true'* ]] || fail_serve "POST /v1/allow of the policy added before SIGHUP: want 200, allowed, got: $answer"
grep -q 'shutting down' "$serve_log" && fail_serve "SIGHUP stopped sluice-serve"
stop_with TERM terminated
start_serve
stop_with INT interrupt

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

# modproxy lists the version in each module's @v/list, from which the go
# command resolves @latest: a go get with no version takes the release.
echo "== another throwaway module: go get github.com/sluicehq/sluice/grpclimit (no version: @latest)"
mkdir "$work/latest"
cd "$work/latest"
go mod init example.com/latest >/dev/null 2>&1
cp "$work/app/main.go" .
go get github.com/sluicehq/sluice/grpclimit
if ! grep -q "github.com/sluicehq/sluice/grpclimit $version" go.mod; then
  echo "go get with no version did not take grpclimit $version; go.mod:"
  cat go.mod
  exit 1
fi
go mod tidy
go build -o app .
expect 'grpclimit: ok' "the second throwaway module's program did not run" ./app
echo "== installed and imported from outside the checkout: ok"
