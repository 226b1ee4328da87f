#!/usr/bin/env bash
# TLS: where a pair's extra time goes. One redis-server with a plain and a TLS
# port (certificates made now, tests/harness/certs.sh); `distlock_bench count`
# makes exactly PAIRS acquire+release pairs on each, in alternating rounds,
# and this script reads CPU time (user+system, /proc) of the client process
# and of the redis-server around each run. CPU time is what load on a shared
# machine does not change much, unlike pairs/s: it shows how much of TLS's
# cost is the client's (ours to cut) and how much the server's.
#
#   bash bench/c/tls_cost.sh [PAIRS=20000] [ROUNDS=3]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${DISTLOCK_TLSCOST_BUILD:-/tmp/distlock-tlscost}
pairs=${1:-20000} rounds=${2:-3}
mkdir -p "$build"
cmake -S "$repo" -B "$build/core" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLOCK_BUILD_TESTS=OFF \
  -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF > "$build/build.log" 2>&1
cmake --build "$build/core" --target distlock_static -j2 >> "$build/build.log" 2>&1
cc -O2 -Wall -o "$build/distlock_bench" "$here/distlock_bench.c" -I "$repo/core/include" \
  "$build/core/core/libdistlock.a" -lhiredis -lssl -lcrypto -lpthread
work=$(mktemp -d /tmp/distlock-tlscost.XXXXXX)
trap 'bash "$repo/tests/harness/redis.sh" stop "$work" >/dev/null 2>&1; rm -rf "$work"' EXIT
bash "$repo/tests/harness/certs.sh" "$work/certs" >/dev/null
DISTLOCK_TLS_CERTS=$work/certs bash "$repo/tests/harness/redis.sh" start "$work" 1 >/dev/null
plain=$(bash "$repo/tests/harness/redis.sh" uris "$work")
tls="$(bash "$repo/tests/harness/redis.sh" tls-uris "$work")?tls_ca_file=$work/certs/ca.crt"
port=${plain##*:}
pid=$(cat "$work"/redis-"$port".pid 2>/dev/null || pgrep -f "redis-server .*:$port" | head -n 1)
tck=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime + stime
echo "redis-server pid $pid; $(redis-server --version | cut -d' ' -f1-3); $(openssl version)"
echo "PAIRS=$pairs per run; CPU in microseconds per pair (client = the bench process)"
printf '%-6s %5s %10s %12s %12s\n' kind round wall_us client_cpu_us server_cpu_us
for ((r = 1; r <= rounds; r++)); do
  for kind in plain tls; do
    uri=$plain; [ "$kind" = tls ] && uri=$tls
    s0=$(cpu_ticks "$pid")
    t0=$(date +%s%N)
    # the client's own CPU: bash's time keyword (user and system seconds)
    { TIMEFORMAT='%U %S'; time "$build/distlock_bench" count "$uri" "$pairs" \
        "bench:tlscost" - >/dev/null; } 2> "$work/time"
    t1=$(date +%s%N)
    s1=$(cpu_ticks "$pid")
    read -r cu cs < "$work/time"
    awk -v k="$kind" -v r="$r" -v n="$pairs" -v w=$((t1 - t0)) -v cu="$cu" -v cs="$cs" \
        -v st=$((s1 - s0)) -v hz="$tck" \
      'BEGIN { printf "%-6s %5d %10.1f %12.1f %12.1f\n", k, r, w / 1000 / n,
               (cu + cs) * 1e6 / n, st / hz * 1e6 / n }'
  done
done
