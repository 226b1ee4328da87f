#!/usr/bin/env bash
# Several keys: what a set costs against a plain lock. Starts three
# redis-servers (tests/harness/redis.sh), builds libdistlock and
# bench/c/distlock_bench into BUILD (default /tmp/distlock-manycost), and runs
# `distlock_bench manycost` on 1 node and on 3 nodes: acquire+release pairs/s
# of a plain lock, of distlock_acquire_many() with 1 key and with 4 keys, in
# alternating slices of one run (one script call per node for a set: the
# difference is the script's work and the longer request, not round trips).
# Redis servers run on CPU 0 and the client on CPU 1 when there are two
# (taskset), as bench/run.sh places them.
#
#   bash bench/c/many_cost.sh [SLICE_MS=1000] [ROUNDS=9]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${DISTLOCK_MANYCOST_BUILD:-/tmp/distlock-manycost}
slice=${1:-1000} rounds=${2:-9}
mkdir -p "$build"
cmake -S "$repo" -B "$build/core" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLOCK_BUILD_TESTS=OFF \
  -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF -DDISTLOCK_SANITIZE= > "$build/build.log" 2>&1
cmake --build "$build/core" --target distlock_static -j2 >> "$build/build.log" 2>&1
cc -O2 -Wall -o "$build/distlock_bench" "$here/distlock_bench.c" -I "$repo/core/include" \
  "$build/core/core/libdistlock.a" -lhiredis -lssl -lcrypto -lpthread
work=$(mktemp -d /tmp/distlock-manycost.XXXXXX)
trap 'bash "$repo/tests/harness/redis.sh" stop "$work" >/dev/null 2>&1; rm -rf "$work"' EXIT
pin_srv=() pin_cli=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  pin_srv=(taskset -c 0) pin_cli=(taskset -c 1)
fi
read -r -a ports < <("${pin_srv[@]}" bash "$repo/tests/harness/redis.sh" start "$work" 3)
one="redis://127.0.0.1:${ports[0]}"
three="$one,redis://127.0.0.1:${ports[1]},redis://127.0.0.1:${ports[2]}"
echo "$(redis-server --version | cut -d' ' -f1-3); slices of $slice ms, $rounds rounds"
echo "-- 1 node"
"${pin_cli[@]}" "$build/distlock_bench" manycost "$one" "$slice" "$rounds" "bench:many"
echo "-- 3 nodes"
"${pin_cli[@]}" "$build/distlock_bench" manycost "$three" "$slice" "$rounds" "bench:many"
