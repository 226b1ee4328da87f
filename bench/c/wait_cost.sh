#!/usr/bin/env bash
# WAIT for replicas: what it costs. Starts a master and its replica
# (tests/harness/redis.sh: REPLICAOF, link polled up), builds libdistlock and
# bench/c/distlock_bench into BUILD (default /tmp/distlock-waitcost), and runs
# `distlock_bench waitcost`: acquire+release pairs/s with
# DISTLOCK_OPT_WAIT_REPLICAS = 1 against 0, alternating slices in one run.
#
#   bash bench/c/wait_cost.sh [SLICE_MS=1000] [ROUNDS=9]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${DISTLOCK_WAITCOST_BUILD:-/tmp/distlock-waitcost}
slice=${1:-1000} rounds=${2:-9}
mkdir -p "$build"
cmake -S "$repo" -B "$build/core" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLOCK_BUILD_TESTS=OFF \
  -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF > "$build/build.log" 2>&1
cmake --build "$build/core" --target distlock_static -j2 >> "$build/build.log" 2>&1
cc -O2 -Wall -o "$build/distlock_bench" "$here/distlock_bench.c" -I "$repo/core/include" \
  "$build/core/core/libdistlock.a" -lhiredis -lpthread
work=$(mktemp -d /tmp/distlock-waitcost.XXXXXX)
trap 'bash "$repo/tests/harness/redis.sh" stop "$work" >/dev/null 2>&1; rm -rf "$work"' EXIT
bash "$repo/tests/harness/redis.sh" start "$work" 2 >/dev/null
read -r m r _ < <(bash "$repo/tests/harness/redis.sh" replicate "$work")
echo "master 127.0.0.1:$m, replica 127.0.0.1:$r; $(redis-server --version | cut -d' ' -f1-3)"
"$build/distlock_bench" waitcost "redis://127.0.0.1:$m" 1 "$slice" "$rounds" "bench:waitcost"
