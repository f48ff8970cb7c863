#!/usr/bin/env bash
# Server-side cost of Sluice's scripts in CPU instructions, not seconds:
# each case runs in its own throwaway redis-server under valgrind's
# callgrind, collecting only inside evalShaCommand (the EVALSHA command and
# everything it calls), and prints instructions per EVALSHA and per
# decision. Instruction counts repeat exactly for the same binary and
# inputs whatever else the machine does, so small differences (GCRA
# against the token bucket) can be compared where INFO commandstats'
# microseconds are noise.
#
#   bench/instructions.sh            (from the repository's root; needs
#                                     valgrind, redis-server, redis-cli and
#                                     redis-benchmark on PATH)
#
# Every server it starts listens on a free loopback port and is shut down
# before the next case starts.
set -euo pipefail

N=${N:-2000} # EVALSHA calls per case (batches: N/4)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go run ./internal/cmd/dumpscripts "$dir/scripts"

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# measure NAME DECISIONS_PER_CALL CALLS SOURCE -- EVALSHA-ARGS...
measure() {
	local name=$1 per=$2 calls=$3 source=$4
	shift 5
	local port pid out
	port=$(free_port)
	out="$dir/$(echo "$name" | tr -c "A-Za-z0-9\n" _)"
	valgrind --tool=callgrind --callgrind-out-file="$out.cg" --toggle-collect=evalShaCommand \
		redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$out.log" 2>&1 &
	pid=$!
	for _ in $(seq 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
	local sha
	sha=$(redis-cli -p "$port" script load "$source")
	redis-cli -p "$port" evalsha "$sha" "$@" >/dev/null # the key exists from here on
	redis-benchmark -p "$port" -c 1 -n "$calls" EVALSHA "$sha" "$@" >/dev/null 2>&1
	local ran
	ran=$(redis-cli -p "$port" info commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
	redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
	wait "$pid" || true
	local ir
	ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out.log")
	printf '%-44s %10d %12d\n' "$name" $((ir / ran)) $((ir / ran / per))
}

S="$dir/scripts"
A="1000000 1000000 1000000000000 1" # rate, period_us, burst, cost: always allowed
printf '%-44s %10s %12s\n' "script" "instr/call" "instr/decision"
measure "return 1 (EVALSHA's own cost)" 1 "$N" "return 1" -- 1 "{t1}:e" $A
measure "TIME, return 1" 1 "$N" "local t = redis.call('TIME') return 1" -- 1 "{t1}:e" $A
measure "INCR+PEXPIRE (no TIME, no validation)" 1 "$N" "local c = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return c" -- 1 "{t1}:i" 60000
measure "floor: TIME+GET+SET PX (no validation)" 1 "$N" "local t = redis.call('TIME') redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], t[1], 'PX', ARGV[1]) return 1" -- 1 "{t1}:f" 60000
measure "prelude only (validate 4 args, TIME)" 1 "$N" "$(cat "$S/prelude.lua")
return 1" -- 1 "{t1}:p" $A
rr=$(cd bench && go list -m -f '{{.Dir}}' github.com/go-redis/redis_rate/v10)
measure "go-redis/redis_rate v10 (its allowN script)" 1 "$N" "$(sed -n '/^var allowN = redis.NewScript(`/,/^`)/p' "$rr/lua.go" | sed '1d;$d')" -- 1 "rate:{t1}" 1000000000 1000000 1 1
for alg in tokenbucket gcra fixedwindow slidingcounter; do
	measure "$alg" 1 "$N" "$(cat "$S/$alg.lua")" -- 1 "{t1}:$alg" $A
done
for alg in tokenbucket fixedwindow; do
	keys="" hot="" args=""
	for i in $(seq 16); do keys="$keys {t$i}:$alg"; hot="$hot {t1}:$alg"; args="$args $A"; done
	# shellcheck disable=SC2086
	measure "$alg batch of 16, 16 keys" 16 $((N / 4)) "$(cat "$S/${alg}_batch.lua")" -- 16 $keys 16 $args
	# shellcheck disable=SC2086
	measure "$alg batch of 16, one key" 16 $((N / 4)) "$(cat "$S/${alg}_batch.lua")" -- 16 $hot 16 $args
done
